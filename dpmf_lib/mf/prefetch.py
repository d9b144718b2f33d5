"""Software prefetch from numba: ``@intrinsic``\\ s that emit LLVM's ``llvm.prefetch`` (x86: ``prefetcht0``).

numba has no prefetch function, but ``numba.extending.intrinsic`` lets a jitted function emit any LLVM instruction.
``prefetch_row(A, i)`` issues one read-prefetch (locality 3 = keep in all cache levels) for every 64-byte line of row
``i`` of a 2-D array (any row stride). It is a hint only: no fault on any address, no effect on results. The
generated assembly is checked in ``tests/lib/mf/test_kernels.py`` (``prefetcht0`` must appear, and no NRT
reference-count call or reshape in the C-SGD loop).

The row address is computed in the intrinsic from the array's data pointer and its row stride: nothing but the
``prefetcht0`` instructions and one multiply-add per line. Why not prefetch through a 1-D ``reshape``: in numba that
reshape is a call plus reference-count increments and decrements *per rating*, which made prefetching a net loss.
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic


def _emit_prefetch(builder, ptr):
    i32 = ir.IntType(32)
    i8p = builder.bitcast(ptr, ir.IntType(8).as_pointer())
    fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer(), i32, i32, i32])
    fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
    builder.call(fn, [i8p, i32(0), i32(3), i32(1)])  # read, locality 3, data cache


@intrinsic
def prefetch_address(typingctx, arr, idx):
    """Prefetch the cache line holding ``arr.flat[idx]`` (1-D or C-contiguous view; no bounds check)."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty, _ = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        _emit_prefetch(builder, builder.gep(ary.data, [args[1]]))
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def prefetch_row_byte(typingctx, arr, row, offset):
    """Prefetch the cache line holding byte ``offset`` of row ``row`` of the 2-D array ``arr`` (no bounds check):
    address = data + row · strides[0] + offset, computed without creating any array view."""
    if not (isinstance(arr, types.Array) and arr.ndim == 2):
        return None
    sig = types.void(arr, row, offset)

    def codegen(context, builder, signature, args):
        aryty, rowty, offty = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        intp = context.get_value_type(types.intp)
        r = context.cast(builder, args[1], rowty, types.intp)
        o = context.cast(builder, args[2], offty, types.intp)
        stride0 = builder.extract_value(ary.strides, 0)
        byte_off = builder.add(builder.mul(r, stride0), o)
        base = builder.ptrtoint(ary.data, intp)
        ptr = builder.inttoptr(builder.add(base, byte_off), ir.IntType(8).as_pointer())
        _emit_prefetch(builder, ptr)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, inline="always")
def prefetch_row(A, i):
    """Prefetch every 64-byte cache line of row ``i`` of the 2-D array ``A`` (contiguous rows; a row that does not
    start on a line boundary spans one line more, which the last prefetch covers)."""
    nbytes = A.shape[1] * A.itemsize
    for off in range(0, nbytes, 64):
        prefetch_row_byte(A, i, off)
    if nbytes > 0:
        prefetch_row_byte(A, i, nbytes - 1)
