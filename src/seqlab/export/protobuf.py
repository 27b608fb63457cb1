"""ONNX files read at the level of their protocol-buffer framing, without the onnx package (which the ONNX
server's install lacks): what is wrong with a graph file onnxruntime cannot load (`model_problem`: truncated,
or not an ONNX model at all), and the weights a graph holds (`float_initializers`).

A protocol-buffer message is a run of fields, each a varint tag (field number << 3 | wire type) and a value:
a varint (wire type 0), 8 bytes (1), a varint length and that many bytes (2), or 4 bytes (5). An ONNX file is
one `ModelProto` (onnx/onnx.proto); its graph is field 7, a `GraphProto`, whose initializers (field 5) are
`TensorProto`s: dims (1), data_type (2), float_data (4), int32_data (5), raw_data (9).
"""

from __future__ import annotations

from collections.abc import Iterator

# ModelProto's fields: number -> wire type (ir_version, producer_name, producer_version, domain, model_version,
# doc_string, graph, opset_import, metadata_props, training_info, functions, configuration)
MODEL_FIELDS = {1: 0, 2: 2, 3: 2, 4: 2, 5: 0, 6: 2, 7: 2, 8: 2, 14: 2, 20: 2, 25: 2, 26: 2}
GRAPH, INITIALIZER = 7, 5                                    # ModelProto.graph, GraphProto.initializer
DIMS, DATA_TYPE, FLOAT_DATA, INT32_DATA, RAW_DATA = 1, 2, 4, 5, 9   # TensorProto's
WEIGHTS = (1, 10)                                            # TensorProto.FLOAT, FLOAT16: weights, not shapes


class Truncated(ValueError):
    """The bytes end inside a field."""


def varint(data: bytes | memoryview, position: int) -> tuple[int, int]:
    """The varint at `position` and the position after it."""
    value = 0
    for shift in range(0, 70, 7):
        if position >= len(data):
            raise Truncated
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
    raise ValueError("a varint of more than ten bytes")


def fields(data: bytes | memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """Each field of one message: (number, wire type, value: an int for a varint, else its bytes). Raises
    Truncated where the bytes end inside a field, ValueError at a wire type protocol buffers do not have."""
    view = memoryview(data)
    position = 0
    while position < len(view):
        tag, position = varint(view, position)
        number, wire = tag >> 3, tag & 7
        value: int | memoryview
        if wire == 0:
            value, position = varint(view, position)
        elif wire in (1, 2, 5):
            size, position = (8, position) if wire == 1 else (4, position) if wire == 5 else varint(view, position)
            value, position = view[position:position + size], position + size
            if position > len(view):
                raise Truncated
        else:
            raise ValueError(f"wire type {wire}")
        yield number, wire, value


def model_problem(data: bytes) -> str | None:
    """What keeps `data` from being an ONNX model, for a message ("is truncated ...", "is not an ONNX graph
    ..."); None when its framing is a ModelProto's: every top-level field one of its own, of its wire type, each
    length within the file, a graph among them."""
    numbers = set()
    try:
        for number, wire, _ in fields(data):
            if MODEL_FIELDS.get(number) != wire:
                raise ValueError(f"field {number}")
            numbers.add(number)
    except Truncated:
        return (f"is truncated: its {len(data):,} bytes end inside the ONNX model (a copy cut short, or a disk that "
                "filled while it was written)")
    except ValueError:
        return ("is not an ONNX graph: its bytes are not an ONNX model's (the file is damaged, or another file took "
                "its place)")
    return None if GRAPH in numbers else "is not an ONNX graph: it holds no graph"


def float_initializers(data: bytes) -> Iterator[tuple[tuple[int, ...], bytes]]:
    """The (shape, stored bytes) of each float initializer of an ONNX model's graph: its weights."""
    for number, wire, graph in fields(data):
        if (number, wire) != (GRAPH, 2):
            continue
        assert isinstance(graph, memoryview)                     # wire type 2: its bytes
        for item, item_wire, tensor in fields(graph):
            if (item, item_wire) != (INITIALIZER, 2):
                continue
            assert isinstance(tensor, memoryview)
            dims: list[int] = []
            data_type: int | memoryview = 0
            stored: list[bytes] = []
            for field, _, value in fields(tensor):
                if field == DIMS:                                # repeated int64: packed, or one field each
                    dims += [value] if isinstance(value, int) else list(packed(value))   # a varint: wire type 0
                elif field == DATA_TYPE:
                    data_type = value
                elif field in (FLOAT_DATA, INT32_DATA, RAW_DATA):
                    stored.append(value.to_bytes(8, "little") if isinstance(value, int) else bytes(value))
            if data_type in WEIGHTS:
                yield tuple(dims), b"".join(stored)


def packed(data: memoryview) -> Iterator[int]:
    """The varints of a packed repeated field."""
    position = 0
    while position < len(data):
        value, position = varint(data, position)
        yield value
