"""The pprof profile format (github.com/google/pprof, proto/profile.proto), written by protobuf.

pprof's messages are declared here as a descriptor built in code -- the field numbers and types of
profile.proto -- and protobuf (already installed with angr) makes the message classes and writes
the bytes, so no generated code or copy of the .proto is kept.  Every profiler UI that reads
pprof (pprof itself, Speedscope, Perfetto, Grafana Pyroscope, Polar Signals) reads these.
"""

from __future__ import annotations

import functools

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_I64, _U64, _BOOL = (descriptor_pb2.FieldDescriptorProto.TYPE_INT64, descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
                     descriptor_pb2.FieldDescriptorProto.TYPE_BOOL)
_MSG = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
_STR = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
_ONE, _MANY = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL, descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED

# message -> (field name, number, type, repeated, message type): profile.proto as of pprof 2024
_MESSAGES = {
    "Profile": [("sample_type", 1, _MSG, True, "ValueType"), ("sample", 2, _MSG, True, "Sample"),
                ("mapping", 3, _MSG, True, "Mapping"), ("location", 4, _MSG, True, "Location"),
                ("function", 5, _MSG, True, "Function"), ("string_table", 6, _STR, True, None),
                ("drop_frames", 7, _I64, False, None), ("keep_frames", 8, _I64, False, None),
                ("time_nanos", 9, _I64, False, None), ("duration_nanos", 10, _I64, False, None),
                ("period_type", 11, _MSG, False, "ValueType"), ("period", 12, _I64, False, None),
                ("comment", 13, _I64, True, None), ("default_sample_type", 14, _I64, False, None)],
    "ValueType": [("type", 1, _I64, False, None), ("unit", 2, _I64, False, None)],
    "Sample": [("location_id", 1, _U64, True, None), ("value", 2, _I64, True, None), ("label", 3, _MSG, True, "Label")],
    "Label": [("key", 1, _I64, False, None), ("str", 2, _I64, False, None), ("num", 3, _I64, False, None),
              ("num_unit", 4, _I64, False, None)],
    "Mapping": [("id", 1, _U64, False, None), ("memory_start", 2, _U64, False, None),
                ("memory_limit", 3, _U64, False, None), ("file_offset", 4, _U64, False, None),
                ("filename", 5, _I64, False, None), ("build_id", 6, _I64, False, None),
                ("has_functions", 7, _BOOL, False, None), ("has_filenames", 8, _BOOL, False, None),
                ("has_line_numbers", 9, _BOOL, False, None), ("has_inline_frames", 10, _BOOL, False, None)],
    "Location": [("id", 1, _U64, False, None), ("mapping_id", 2, _U64, False, None), ("address", 3, _U64, False, None),
                 ("line", 4, _MSG, True, "Line"), ("is_folded", 5, _BOOL, False, None)],
    "Line": [("function_id", 1, _U64, False, None), ("line", 2, _I64, False, None), ("column", 3, _I64, False, None)],
    "Function": [("id", 1, _U64, False, None), ("name", 2, _I64, False, None), ("system_name", 3, _I64, False, None),
                 ("filename", 4, _I64, False, None), ("start_line", 5, _I64, False, None)],
}


@functools.cache
def messages() -> dict:
    """Message name -> protobuf class (built once a process, in a pool of its own)."""
    f = descriptor_pb2.FileDescriptorProto(name="gitperf_pprof.proto", package="perftools.profiles", syntax="proto3")
    for name, fields in _MESSAGES.items():
        m = f.message_type.add(name=name)
        for fname, number, typ, repeated, ref in fields:
            field = m.field.add(name=fname, number=number, type=typ, label=_MANY if repeated else _ONE)
            if ref:
                field.type_name = f".perftools.profiles.{ref}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"perftools.profiles.{name}"))
            for name in _MESSAGES}
