"""The wire format the relay, the station and the Evaluation Client share: .proto files and their generated modules.

The protobuf package stays ``strands_robots.relay.v1`` whatever the Python path: the services' names on the wire
are built from it, so a peer of another version still finds them. ``generate.py`` writes the modules.

Nothing here imports grpc except the ``*_pb2_grpc`` modules, so the message modules load with protobuf alone.
"""
