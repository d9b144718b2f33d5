"""Atomic loads, stores and a compare-and-swap on an element of an int64 array, for numba kernels (LLVM intrinsics).

- :func:`try_lock` / :func:`unlock` — a spin lock's test-and-set (``cmpxchg`` 0 → 1, acquire) and release store;
- :func:`load_relaxed` — a monotonic load, re-read on every call of a spin loop;
- :func:`load_acquire` / :func:`store_release` — an acquire load and a release store.

Used by the merge lock of :mod:`dpmf_lib.mf.hot_rows` and the core-to-core ping-pong of :mod:`dpmf_lib.bench.machine`.
"""

from __future__ import annotations

from numba import types
from numba.extending import intrinsic


@intrinsic
def try_lock(typingctx, arr, idx):
    """Atomically set ``arr[idx]`` (int64) from 0 to 1 (acquire); True if this call did."""
    sig = types.boolean(arr, idx)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.gep(ary.data, [args[1]])
        zero = context.get_constant(types.int64, 0)
        one = context.get_constant(types.int64, 1)
        res = builder.cmpxchg(ptr, zero, one, "acquire", "monotonic")
        return builder.extract_value(res, 1)

    return sig, codegen


@intrinsic
def unlock(typingctx, arr, idx):
    """``arr[idx] = 0`` as an atomic release store."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        zero = context.get_constant(types.int64, 0)
        builder.store_atomic(zero, builder.gep(ary.data, [args[1]]), ordering="release", align=8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def load_relaxed(typingctx, arr, idx):
    """``arr[idx]`` (int64) as an atomic monotonic load: re-read on every call of a spin loop."""
    sig = types.int64(arr, idx)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.load_atomic(builder.gep(ary.data, [args[1]]), ordering="monotonic", align=8)

    return sig, codegen


@intrinsic
def load_acquire(typingctx, arr, idx):
    """``arr[idx]`` as an atomic acquire load: re-read from memory on every call (a plain load in a spin loop may be
    hoisted out of it by the compiler)."""
    sig = types.int64(arr, idx)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.load_atomic(builder.gep(ary.data, [args[1]]), ordering="acquire", align=8)

    return sig, codegen


@intrinsic
def store_release(typingctx, arr, idx, val):
    """``arr[idx] = val`` as an atomic release store."""
    sig = types.void(arr, idx, val)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        builder.store_atomic(args[2], builder.gep(ary.data, [args[1]]), ordering="release", align=8)
        return context.get_dummy_value()

    return sig, codegen
