"""Checkpoints in MindSpore's own `.ckpt` format (`mindspore.train.serialization`):
`save_checkpoint`, `load_checkpoint`, `load_param_into_net`.

The format, read from MindSpore 2.10's `checkpoint.proto` and
`serialization.py`: a file is a sequence of protobuf `Checkpoint` messages

    message Checkpoint { repeated Value value = 1;
        message Value { required string tag = 1;
                        oneof value { TensorProto tensor = 2; MapTensorProto maptensor = 3; } } }
    message TensorProto { repeated int64 dims = 1; required string tensor_type = 2;
                          required bytes tensor_content = 3; }

one per parameter (a parameter over 512 MiB is split into several values of
the same tag, whose contents join), concatenated — which protobuf reads as
one `Checkpoint` with all the values. `tensor_type` is MindSpore's dtype
name (`Float32`, `Int32`, ...), the content the raw little-endian array, a
scalar has no dims; a string (from `append_dict`) is the type `str` with
dims `[0]` and UTF-32 content. With `crc_check=True` the file ends with
`b"crc_num"` and the CRC-32 of everything before it in 10 big-endian bytes.

The wire format is encoded and decoded here (varints and length-delimited
fields, some 80 lines) rather than with the `protobuf` package: three fixed
messages do not justify a dependency, and a hand-written reader can say
exactly where a truncated or foreign file stops making sense. Decoding
accepts what any protobuf writer may produce (packed or unpacked dims,
unknown fields inside a value skipped); a file whose top level is not
`Checkpoint.value` fields, or that ends inside a field, is refused as not a
MindSpore checkpoint, naming the file and the byte.

Saving writes a temporary file beside the target and moves it over the
target with `os.replace` only once it is complete and flushed to disk, so an
interrupted save leaves the previous checkpoint as it was (MindSpore
deletes the old file before writing the new one, and leaves it read-only;
msir does neither). Encryption (`enc_key`), `async_save` (saved at once) and
formats other than "ckpt" are not supported: the first and last are refused.
"""

from __future__ import annotations

import binascii
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from msir.common.parameter import Parameter
from msir.common.tensor import Tensor
from msir.errors import DTypeError, MsirValueError, ShapeError

_NP_OF_TYPE = {
    "Bool": np.bool_, "Int8": np.int8, "UInt8": np.uint8, "Int16": np.int16, "UInt16": np.uint16,
    "Int32": np.int32, "UInt32": np.uint32, "Int64": np.int64, "UInt64": np.uint64,
    "Float16": np.float16, "Float32": np.float32, "Float64": np.float64,
}
_TYPE_OF_NP = {np.dtype(v): k for k, v in _NP_OF_TYPE.items()}
_STRING_TYPE = "str"
_CRC_MARK = b"crc_num"
_CRC_TRAILER = len(_CRC_MARK) + 10

_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5

# -- the protobuf wire format ------------------------------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, wire_type: int, payload: bytes | int) -> bytes:
    key = _varint(number << 3 | wire_type)
    if wire_type == _VARINT:
        return key + _varint(payload)
    return key + _varint(len(payload)) + payload


def _encode_value(tag: str, dims: tuple[int, ...], tensor_type: str, content: bytes) -> bytes:
    """One `Checkpoint` message holding one `Value`, as MindSpore writes each parameter."""
    tensor = b"".join(_field(1, _VARINT, d) for d in dims)
    tensor += _field(2, _LENGTH, tensor_type.encode()) + _field(3, _LENGTH, content)
    value = _field(1, _LENGTH, tag.encode()) + _field(2, _LENGTH, tensor)
    return _field(1, _LENGTH, value)


class _Truncated(Exception):
    """The bytes end inside a field."""


class _Reader:
    """Fields of one protobuf message in `data[start:end]`."""

    def __init__(self, data: bytes, start: int, end: int):
        self.data, self.pos, self.end = data, start, end

    def varint(self) -> int:
        result, shift = 0, 0
        while True:
            if self.pos >= self.end:
                raise _Truncated
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise ValueError("a varint longer than 10 bytes")

    def fields(self) -> Iterator[tuple[int, int, Any, int]]:
        """(field number, wire type, value, offset) for each field; a length-delimited value is its (start, end)."""
        while self.pos < self.end:
            offset = self.pos
            key = self.varint()
            number, wire_type = key >> 3, key & 7
            if wire_type == _VARINT:
                value: Any = self.varint()
            elif wire_type == _LENGTH:
                length = self.varint()
                if self.pos + length > self.end:
                    raise _Truncated
                value = (self.pos, self.pos + length)
                self.pos += length
            elif wire_type in (_FIXED64, _FIXED32):
                size = 8 if wire_type == _FIXED64 else 4
                if self.pos + size > self.end:
                    raise _Truncated
                value = self.data[self.pos:self.pos + size]
                self.pos += size
            else:
                raise ValueError(f"wire type {wire_type} (a group), which no checkpoint field has")
            yield number, wire_type, value, offset


def _decode(data: bytes) -> list[tuple[str, list[int], str, bytes]]:
    """The values of a checkpoint file's content: (tag, dims, tensor_type, content)."""
    values = []
    top = _Reader(data, 0, len(data))
    for number, wire_type, span, offset in top.fields():
        if number != 1 or wire_type != _LENGTH:
            raise ValueError(f"byte {offset} holds field {number} (wire type {wire_type}), not Checkpoint.value")
        values.append(_decode_value(data, span, offset))
    return values


def _decode_value(data: bytes, span: tuple[int, int], offset: int) -> tuple[str, list[int], str, bytes]:
    tag, tensor = None, None
    for number, wire_type, value, _ in _Reader(data, *span).fields():
        if number == 1 and wire_type == _LENGTH:
            tag = data[value[0]:value[1]].decode("utf-8")
        elif number == 2 and wire_type == _LENGTH:
            tensor = value
        elif number == 3 and wire_type == _LENGTH:
            raise ValueError(f"the value at byte {offset} is a MapTensor, which msir does not read")
    if tag is None or tensor is None:
        raise ValueError(f"the value at byte {offset} has no {'tag' if tag is None else 'tensor'}")
    dims: list[int] = []
    tensor_type, content = None, None
    for number, wire_type, value, _ in _Reader(data, *tensor).fields():
        if number == 1 and wire_type == _VARINT:
            dims.append(value)
        elif number == 1 and wire_type == _LENGTH:  # packed dims
            packed = _Reader(data, *value)
            while packed.pos < packed.end:
                dims.append(packed.varint())
        elif number == 2 and wire_type == _LENGTH:
            tensor_type = data[value[0]:value[1]].decode("utf-8")
        elif number == 3 and wire_type == _LENGTH:
            content = data[value[0]:value[1]]
    if tensor_type is None or content is None:
        raise ValueError(f"the tensor of '{tag}' has no {'tensor_type' if tensor_type is None else 'content'}")
    return tag, dims, tensor_type, content


# -- saving --------------------------------------------------------------------------------------


def _items_to_save(save_obj: Any, append_dict: dict | None, choice_func: Callable | None) -> list[tuple[str, Any]]:
    from msir.nn.cell import Cell

    if isinstance(save_obj, Cell):
        items = [(p.name, p) for _, p in save_obj.parameters_and_names()]
    elif isinstance(save_obj, dict):
        items = list(save_obj.items())
    elif isinstance(save_obj, list):
        items = []
        for entry in save_obj:
            if isinstance(entry, Parameter):
                items.append((entry.name, entry))
            elif isinstance(entry, dict) and set(entry) == {"name", "data"}:
                items.append((entry["name"], entry["data"]))
            else:
                raise TypeError(
                    "save_checkpoint: a list to save holds Parameters or {'name': ..., 'data': ...} dicts, got "
                    f"{type(entry).__name__}"
                )
    else:
        raise TypeError(f"save_checkpoint: save_obj must be a Cell, a list or a dict, got {type(save_obj).__name__}")
    if choice_func is not None:
        items = [(name, value) for name, value in items if choice_func(name)]
    if append_dict:
        for name, value in append_dict.items():
            if not isinstance(value, (str, bool, int, float, np.ndarray, np.generic, Tensor)):
                raise TypeError(
                    f"save_checkpoint: append_dict['{name}'] must be a str, a number or a Tensor, got "
                    f"{type(value).__name__}"
                )
            items.append((name, value if isinstance(value, str) else Tensor(value)))
    seen: set[str] = set()
    for name, _ in items:
        if not isinstance(name, str) or not name:
            raise TypeError(f"save_checkpoint: a name to save must be a non-empty str, got {name!r}")
        if name in seen:
            raise MsirValueError(f"save_checkpoint: the name '{name}' is saved twice")
        seen.add(name)
    return items


def _encode_item(name: str, value: Any) -> bytes:
    if isinstance(value, str):
        return _encode_value(name, (0,), _STRING_TYPE, np.array(value).tobytes())
    array = np.asarray(value.asnumpy() if isinstance(value, Tensor) else value)
    tensor_type = _TYPE_OF_NP.get(array.dtype)
    if tensor_type is None:
        raise DTypeError(f"save_checkpoint: '{name}' has dtype {array.dtype}, which a checkpoint cannot hold")
    content = np.ascontiguousarray(array, array.dtype.newbyteorder("<")).tobytes()
    return _encode_value(name, array.shape, tensor_type, content)


def save_checkpoint(save_obj: Any, ckpt_file_name: str, integrated_save: bool = True, async_save: bool = False,
                    append_dict: dict | None = None, enc_key: bytes | None = None, enc_mode: str = "AES-GCM",
                    choice_func: Callable | None = None, crc_check: bool = False, format: str = "ckpt",
                    **kwargs: Any) -> None:
    """Save `save_obj` (a Cell's parameters, a list of Parameters or of `{'name', 'data'}`
    dicts, or a dict name -> Tensor) to `ckpt_file_name` (".ckpt" appended if missing),
    with `append_dict`'s extra values."""
    if enc_key is not None:
        raise MsirValueError("save_checkpoint: encrypted checkpoints (enc_key) are not supported")
    if format != "ckpt":
        raise MsirValueError(f"save_checkpoint: only the 'ckpt' format is supported, got {format!r}")
    if not isinstance(ckpt_file_name, (str, os.PathLike)):
        raise TypeError(f"save_checkpoint: ckpt_file_name must be a path, got {type(ckpt_file_name).__name__}")
    path = os.path.abspath(os.fspath(ckpt_file_name))
    if not path.endswith(".ckpt"):
        path += ".ckpt"
    payload = b"".join(_encode_item(name, value) for name, value in _items_to_save(save_obj, append_dict, choice_func))
    if crc_check:
        payload += _CRC_MARK + binascii.crc32(payload).to_bytes(10, "big")
    _write_atomically(path, payload)


def _write_atomically(path: str, payload: bytes) -> None:
    """`payload` in `path`: the old file stays whole until the new one is complete on disk."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=directory, prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


# -- loading --------------------------------------------------------------------------------------


def _read_checkpoint(path: str, crc_check: bool) -> list[tuple[str, list[int], str, bytes]]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise MsirValueError(f"load_checkpoint: cannot read '{path}': {err.strerror}") from None
    if not data:
        raise MsirValueError(f"load_checkpoint: '{path}' is empty, not a MindSpore checkpoint")
    if data[-_CRC_TRAILER:-10] == _CRC_MARK:
        stored = int.from_bytes(data[-10:], "big")
        data = data[:-_CRC_TRAILER]
        if crc_check and binascii.crc32(data) != stored:
            raise MsirValueError(f"load_checkpoint: the CRC of '{path}' does not match its content: the file is damaged")
    elif crc_check:
        raise MsirValueError(f"load_checkpoint: '{path}' has no CRC to check (it was saved without crc_check)")
    try:
        values = _decode(data)
    except _Truncated:
        raise MsirValueError(f"load_checkpoint: '{path}' is truncated: it ends inside a field") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise MsirValueError(f"load_checkpoint: '{path}' is not a MindSpore checkpoint: {err}") from None
    return values


def _join_slices(values: list[tuple[str, list[int], str, bytes]]) -> Iterator[tuple[str, list[int], str, bytes]]:
    """The values with the slices of one parameter (consecutive values of one tag) joined."""
    i = 0
    while i < len(values):
        tag, dims, tensor_type, content = values[i]
        parts = [content]
        while i + 1 < len(values) and values[i + 1][0] == tag:
            i += 1
            parts.append(values[i][3])
        yield tag, dims, tensor_type, b"".join(parts)
        i += 1


def _as_value(path: str, tag: str, dims: list[int], tensor_type: str, content: bytes) -> Any:
    if tensor_type == _STRING_TYPE:
        return str(np.frombuffer(content, f"<U{len(content) // 4}")[0]) if content else ""
    np_dtype = _NP_OF_TYPE.get(tensor_type)
    if np_dtype is None:
        raise MsirValueError(f"load_checkpoint: '{tag}' in '{path}' has the type '{tensor_type}', which msir cannot read")
    dtype = np.dtype(np_dtype).newbyteorder("<")
    shape = tuple(dims)
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(content) != expected:
        raise MsirValueError(
            f"load_checkpoint: '{tag}' in '{path}' holds {len(content)} bytes, its shape {shape} of {tensor_type} "
            f"needs {expected}: the file is damaged"
        )
    array = np.frombuffer(content, dtype).reshape(shape).astype(np_dtype)
    return Parameter(array, name=tag)


def load_checkpoint(ckpt_file_name: str, net: Any = None, strict_load: bool = False, filter_prefix: Any = None,
                    dec_key: bytes | None = None, dec_mode: str = "AES-GCM", specify_prefix: Any = None,
                    choice_func: Callable | None = None, crc_check: bool = False, remove_redundancy: bool = False,
                    format: str = "ckpt") -> dict:
    """The checkpoint's values, `{name: Parameter}` (strings saved with `append_dict` as str),
    loaded into `net` too when it is given."""
    if dec_key is not None:
        raise MsirValueError("load_checkpoint: encrypted checkpoints (dec_key) are not supported")
    if format != "ckpt":
        raise MsirValueError(f"load_checkpoint: only the 'ckpt' format is supported, got {format!r}")
    path = os.fspath(ckpt_file_name)
    specify, excluded = _prefixes(specify_prefix, "specify_prefix"), _prefixes(filter_prefix, "filter_prefix")
    parameters: dict[str, Any] = {}
    for tag, dims, tensor_type, content in _join_slices(_read_checkpoint(path, crc_check)):
        if specify and not any(tag.startswith(p) for p in specify):
            continue
        if excluded and any(tag.startswith(p) for p in excluded):
            continue
        if choice_func is not None and not choice_func(tag):
            continue
        parameters[tag] = _as_value(path, tag, dims, tensor_type, content)
    if net is not None:
        load_param_into_net(net, parameters, strict_load)
    return parameters


def _prefixes(prefixes: Any, what: str) -> list[str]:
    if prefixes is None:
        return []
    if isinstance(prefixes, str):
        return [prefixes]
    if not isinstance(prefixes, (list, tuple)) or not all(isinstance(p, str) for p in prefixes):
        raise TypeError(f"load_checkpoint: {what} must be a str or a list of them, got {prefixes!r}")
    return list(prefixes)


_FLOAT_KINDS = {np.dtype(t) for t in (np.float16, np.float32, np.float64)}
_INT_KINDS = {np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64)}


def _update_param(param: Parameter, new: Any, strict_load: bool) -> None:
    """MindSpore's rules: the same shape; a different dtype converted within the float types
    or within the signed int types unless `strict_load`."""
    array = np.asarray(new.asnumpy() if isinstance(new, Tensor) else new)
    if array.shape != param.shape:
        raise ShapeError(
            f"load_param_into_net: the parameter '{param.name}' has shape {param.shape} in the net but shape "
            f"{array.shape} in the parameter dict"
        )
    own = param.asnumpy().dtype
    if array.dtype != own:
        pair = {array.dtype, own}
        if strict_load or not (pair <= _FLOAT_KINDS or pair <= _INT_KINDS):
            raise DTypeError(
                f"load_param_into_net: the parameter '{param.name}' has dtype {_TYPE_OF_NP.get(own, own)} in the net "
                f"but {_TYPE_OF_NP.get(array.dtype, array.dtype)} in the parameter dict"
            )
    param.set_data(np.array(array, dtype=own))


def load_param_into_net(net: Any, parameter_dict: dict, strict_load: bool = False,
                        remove_redundancy: bool = False) -> tuple[list[str], list[str]]:
    """Load `parameter_dict`'s values into the parameters of `net` of the same names;
    returns, as MindSpore 2.x does, `(param_not_load, ckpt_not_load)`: the net's
    parameters not loaded and the dict's names not used."""
    from msir.nn.cell import Cell

    if not isinstance(net, Cell):
        raise TypeError(f"load_param_into_net: net must be a Cell, got {type(net).__name__}")
    if not isinstance(parameter_dict, dict):
        raise TypeError(f"load_param_into_net: parameter_dict must be a dict, got {type(parameter_dict).__name__}")
    param_not_load: list[str] = []
    ckpt_not_load = list(parameter_dict)
    params = [p for _, p in net.parameters_and_names()]
    for param in params:
        if param.name in parameter_dict:
            new = parameter_dict[param.name]
            if isinstance(new, str):  # an appended string: nothing to load it into
                continue
            _update_param(param, new, strict_load)
            ckpt_not_load.remove(param.name)
        elif not param.name.startswith("accu_grads"):
            param_not_load.append(param.name)
    if param_not_load and not strict_load:
        _load_with_prefix(params, parameter_dict, param_not_load)
    return param_not_load, ckpt_not_load


def _load_with_prefix(params: list[Parameter], parameter_dict: dict, param_not_load: list[str]) -> None:
    """MindSpore's second chance: the dict's names may carry a prefix the net's lack
    (saved from a wrapper cell); the prefix is found from the first name that ends with
    a missing parameter's name, and the parameters are loaded through it. As in
    MindSpore, the names so used stay in `ckpt_not_load`."""
    prefix = next((name[:-len(missing)] for missing in param_not_load for name in parameter_dict
                   if name.endswith(missing) and name != missing), None)
    if not prefix:
        return
    for param in params:
        name = prefix + param.name
        if param.name in param_not_load and name in parameter_dict and not isinstance(parameter_dict[name], str):
            _update_param(param, parameter_dict[name], False)
            param_not_load.remove(param.name)


__all__ = ["load_checkpoint", "load_param_into_net", "save_checkpoint"]
