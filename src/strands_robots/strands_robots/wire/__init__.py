"""What the relay and the station both speak: the protobuf wire format and the files and limits either end reads.

- ``proto/``: the .proto files and their generated modules (the Evaluation Client ships them too);
- :mod:`.pb_model`: the station's model (``station/model.py``) <-> protobuf;
- :mod:`.credentials`: the station's relay credentials file and the private-file reads the relay's tokens share;
- :mod:`.message_size`: the largest message either end sends by default.

Core: no rclpy, no ROS messages, no grpc at import.
"""
