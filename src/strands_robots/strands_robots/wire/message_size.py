"""The largest gRPC message, either way, that the relay accepts and the station sends by default.

One number for both ends: a policy observation with its camera images must fit it (``cameras/image_budget.py``
refuses a job whose images never could), and the station trims a job's snapshot to it (``station_link``). The
relay's ``max_message_bytes`` setting (``relay/config.py``) starts from it.
"""

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
