"""The relay's wire format: .proto files and the Python modules generated from them (see generate.py).

Nothing here imports grpc except the ``*_pb2_grpc`` modules, so the message modules load with protobuf alone.
"""
