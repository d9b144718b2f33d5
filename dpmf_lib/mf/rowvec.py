"""Whole-row operations on float32 factor rows of a compile-time length ``D`` (numba ``@intrinsic``\\ s).

``row_dot(A, i, B, j, D)`` returns <A[i, :D], B[j, :D]>; ``sgd_row_step``, ``sgld_row_step_iso`` and
``sgld_row_step_diag`` write the SGD update and the SGLD update (isotropic or diagonal Λ, with its noise) of both rows. Each row is read as one ``<D x float>`` LLVM value (16 float32 per AVX-512
register), so the update is straight-line vector code with no loop, no remainder and no runtime alias check; the
row-update kernels (:func:`dpmf_lib.mf.sgd_kernels._sgd_range_rows`, :func:`dpmf_lib.mf.sgld._sgld_range_table_rows`) use
them to read the *next* rating's rows before this rating's update stores (see those kernels for why that is what
pays). ``D`` must be an integer literal at the call site (the kernels get it through ``numba.literally``) and equal
the arrays' row length; rows must be contiguous (C-layout 2-D float32 arrays) and the indices in range: like the
loop kernels (boundscheck off), nothing is checked at run time. Scalars may be any real type; they are cast to float32.
numba types every branch of the kernels' ``if d == ...`` dispatch, so the kernels now take only C-layout float32
factor matrices at every d (a ``TypingError`` otherwise): every caller passes :func:`dpmf_lib.mf.sgd_kernels.aligned_copy`
copies.

Caching: numba's on-disk cache of a kernel is invalidated by changes to the kernel's own source file only, so after
editing this module delete ``dpmf_lib/mf/__pycache__`` (as after editing :mod:`dpmf_lib.mf.prefetch`); the
workbook's run hashes do see the change (every imported module's source is in them).

Where they pay (:func:`whole_row_lengths`): while the two rows of an update fit in half of the vector register file.
With AVX-512 (32 registers of 512 bits, the Zen 4 host on which they were built) that is d ≤ 128; with AVX2 (16 of
256 bits) d ≤ 32: beyond that the rows spill (two ``<128 x float>`` rows are all sixteen AVX2 registers), and the
loop kernel is faster (measurements in docs/performance.md). Below AVX2 (unmeasured) no whole-row kernel is used.

The SGLD steps read four or six row-long operands (rows, noise segments, a diagonal Λ); they are emitted in chunks
that fit half the register file (:func:`step_chunk`), since at d = 128 whole rows spilled.

Arithmetic: the products of ``row_dot`` are summed in an order LLVM chooses (``fast`` flags, as the loop kernels'
``fastmath``), so results agree with the loop kernels and the numpy references to float32 rounding, not bit for bit.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

FAST = ("fast",)
F32 = ir.FloatType()


def vector_register_bits() -> int:
    """The vector register width the whole-row rule assumes: 512 with AVX-512F, 256 with AVX2, else 128, read from
    numba's own target features (``NUMBA_CPU_FEATURES`` if set, else the host's), which its on-disk cache is keyed
    by, so a kernel choice made from it matches the code that cache holds.

    A feature test, not what LLVM emits: under ``NUMBA_ENABLE_AVX=0`` numba masks the ``avx*`` features, yet LLVM
    still emits 256-bit code from ``+fma`` and the like, and AVX1-only or AVX10/256 hosts have 256-bit registers
    without ``avx2``/``avx512f``. There the rule answers 128 and drops the whole-row kernels although 256-bit code
    runs: slower at d = 16 and 32 (the loop kernel), never wrong."""
    from numba.core import config
    from numba.core.codegen import get_host_cpu_features

    features = config.CPU_FEATURES if config.CPU_FEATURES is not None else get_host_cpu_features()
    enabled = {f[1:] for f in features.split(",") if f.startswith("+")}
    return 512 if "avx512f" in enabled else 256 if "avx2" in enabled else 128


def whole_row_lengths(candidates=(16, 32, 64, 128)) -> tuple:
    """The row lengths among ``candidates`` whose two rows (u_i, v_j) take at most half of this machine's vector
    register file: all four with AVX-512 (32 registers), 16 and 32 with AVX2 (16 registers), none below AVX2."""
    bits = vector_register_bits()
    if bits < 256:
        return ()
    registers = 32 if bits >= 512 else 16
    return tuple(D for D in candidates if 2 * D * 32 <= bits * registers // 2)


def _is_rows(a) -> bool:
    return isinstance(a, types.Array) and a.ndim == 2 and a.dtype == types.float32 and a.layout == "C"


def _are_scalars(*xs) -> bool:
    return all(isinstance(x, (types.Float, types.Integer)) for x in xs)


def _literal_length(D):
    if not isinstance(D, types.IntegerLiteral) or D.literal_value < 1:
        return None
    return D.literal_value


def _row_pointer(context, builder, aryty, ary_val, row, rowty, n):
    """``<n x float>*`` to the start of row ``row``: data + row · strides[0], without creating a view."""
    ary = context.make_array(aryty)(context, builder, ary_val)
    intp = context.get_value_type(types.intp)
    r = context.cast(builder, row, rowty, types.intp)
    offset = builder.mul(r, builder.extract_value(ary.strides, 0))
    address = builder.add(builder.ptrtoint(ary.data, intp), offset)
    return builder.inttoptr(address, ir.VectorType(F32, n).as_pointer())


def _element_pointer(context, builder, aryty, ary_val, pos, posty, n):
    """``<n x float>*`` to element ``pos`` of a contiguous 1-D float32 array."""
    ary = context.make_array(aryty)(context, builder, ary_val)
    p = context.cast(builder, pos, posty, types.intp)
    return builder.bitcast(builder.gep(ary.data, [p]), ir.VectorType(F32, n).as_pointer())


def _scalar(context, builder, sig, args, k):
    """Argument ``k`` as a float32 value (callers may pass float64 or integer scalars, e.g. a Python float)."""
    return context.cast(builder, args[k], sig.args[k], types.float32)


def _splat(builder, x, n):
    vt = ir.VectorType(F32, n)
    undef = ir.Constant(vt, ir.Undefined)
    first = builder.insert_element(undef, x, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(first, undef, ir.Constant(ir.VectorType(ir.IntType(32), n), [0] * n))


def step_chunk(n: int, vectors: int) -> int:
    """The chunk length (float32 elements) in which a whole-row step of ``vectors`` row-long operands is emitted:
    the largest power of two ≤ ``n`` whose ``vectors`` chunks take at most half of the vector register file (the
    rule of :func:`whole_row_lengths`, per chunk). The SGLD steps read four rows (u, v and their two noise
    segments; six with a diagonal Λ): at d = 128 as whole rows that was all 32 AVX-512 registers before the
    splatted scalars, and LLVM spilled ~16 vectors to the stack per update. In chunks the same element-wise
    operations run on fewer live registers (faster, see docs/performance.md); the order of the chunks' loads and
    stores is kept by LLVM (a store to a row may alias the next chunk's loads)."""
    bits = vector_register_bits()
    registers = 32 if bits >= 512 else 16
    budget = bits * registers // 2 // 32  # float32 elements in half of the register file
    c = 1
    while c * 2 <= n and vectors * c * 2 <= budget and n % (c * 2) == 0:
        c *= 2
    return c


def _chunk_pointer(builder, p, h, c):
    """``<c x float>*`` to chunk ``h`` (elements ``h·c .. h·c + c - 1``) of the row or segment at ``p``."""
    flat = builder.bitcast(p, F32.as_pointer())
    return builder.bitcast(builder.gep(flat, [ir.Constant(ir.IntType(64), h * c)]), ir.VectorType(F32, c).as_pointer())


def _dot(builder, u, v, n):
    prod = builder.fmul(u, v, flags=FAST)
    fnty = ir.FunctionType(F32, [F32, ir.VectorType(F32, n)])
    reduce = cgutils.get_or_insert_function(builder.module, fnty, f"llvm.vector.reduce.fadd.v{n}f32")
    return builder.call(reduce, [ir.Constant(F32, -0.0), prod], fastmath=FAST)


@intrinsic
def row_dot(typingctx, A, i, B, j, D):
    """<A[i, :D], B[j, :D]> (float32)."""
    n = _literal_length(D)
    if n is None or not (_is_rows(A) and _is_rows(B)):
        return None

    def codegen(context, builder, sig, args):
        u = builder.load(_row_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1], n), align=4)
        v = builder.load(_row_pointer(context, builder, sig.args[2], args[2], args[3], sig.args[3], n), align=4)
        return _dot(builder, u, v, n)

    return types.float32(A, i, B, j, D), codegen


@intrinsic
def sgd_row_step(typingctx, A, i, B, j, shrink, step, D):
    """A[i] ← shrink·A[i] + step·B[j] and B[j] ← shrink·B[j] + step·A[i] (both from the old rows; eq. 3 of
    :mod:`dpmf_lib.mf.csgd` with shrink = 1 − ηλ, step = η e)."""
    n = _literal_length(D)
    if n is None or not (_is_rows(A) and _is_rows(B) and _are_scalars(shrink, step)):
        return None

    def codegen(context, builder, sig, args):
        pu = _row_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1], n)
        pv = _row_pointer(context, builder, sig.args[2], args[2], args[3], sig.args[3], n)
        u = builder.load(pu, align=4)
        v = builder.load(pv, align=4)
        a = _splat(builder, _scalar(context, builder, sig, args, 4), n)
        b = _splat(builder, _scalar(context, builder, sig, args, 5), n)
        new_u = builder.fadd(builder.fmul(a, u, flags=FAST), builder.fmul(b, v, flags=FAST), flags=FAST)
        new_v = builder.fadd(builder.fmul(a, v, flags=FAST), builder.fmul(b, u, flags=FAST), flags=FAST)
        builder.store(new_u, pu, align=4)
        builder.store(new_v, pv, align=4)
        return context.get_dummy_value()

    return types.void(A, i, B, j, shrink, step, D), codegen


@intrinsic
def sgld_row_step_iso(typingctx, A, i, B, j, hg, cu, cv, sdu, sdv, noise, ou, ov, D):
    """The isotropic SGLD step with its noise (:func:`dpmf_lib.mf.sgld._sgld_range_table`, ``iso``):
    A[i] ← ((u + hg·v) − cu·u) + sdu·noise[ou : ou+D] and B[j] ← ((v + hg·u) − cv·v) + sdv·noise[ov : ov+D],
    u, v the old rows; ``noise`` a contiguous 1-D float32 array (the extended Gaussian table)."""
    n = _literal_length(D)
    if n is None or not (_is_rows(A) and _is_rows(B) and _are_scalars(hg, cu, cv, sdu, sdv)):
        return None
    if not (isinstance(noise, types.Array) and noise.ndim == 1 and noise.dtype == types.float32
            and noise.layout == "C"):
        return None

    def codegen(context, builder, sig, args):
        c = step_chunk(n, 4)
        pu0 = _row_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1], n)
        pv0 = _row_pointer(context, builder, sig.args[2], args[2], args[3], sig.args[3], n)
        zu0 = _element_pointer(context, builder, sig.args[9], args[9], args[10], sig.args[10], n)
        zv0 = _element_pointer(context, builder, sig.args[9], args[9], args[11], sig.args[11], n)
        hg, cu, cv, sdu, sdv = (_splat(builder, _scalar(context, builder, sig, args, k), c) for k in range(4, 9))

        def step(x, y, cc, sd, z):
            grad = builder.fsub(builder.fadd(x, builder.fmul(hg, y, flags=FAST), flags=FAST),
                                builder.fmul(cc, x, flags=FAST), flags=FAST)
            return builder.fadd(grad, builder.fmul(sd, z, flags=FAST), flags=FAST)

        for h in range(n // c):  # see step_chunk: both rows' chunk h, loaded before either is stored
            pu, pv = _chunk_pointer(builder, pu0, h, c), _chunk_pointer(builder, pv0, h, c)
            u = builder.load(pu, align=4)
            v = builder.load(pv, align=4)
            zu = builder.load(_chunk_pointer(builder, zu0, h, c), align=4)
            zv = builder.load(_chunk_pointer(builder, zv0, h, c), align=4)
            builder.store(step(u, v, cu, sdu, zu), pu, align=4)
            builder.store(step(v, u, cv, sdv, zv), pv, align=4)
        return context.get_dummy_value()

    return types.void(A, i, B, j, hg, cu, cv, sdu, sdv, noise, ou, ov, D), codegen


@intrinsic
def sgld_row_step_diag(typingctx, A, i, B, j, h, g, pu, pv, Lu, Lv, sdu, sdv, noise, ou, ov, D):
    """The SGLD step with diagonal Λ and its noise (:func:`dpmf_lib.mf.sgld._sgld_range_table`, general case):
    A[i] ← (u + h·(g·v − pu·Lu∘u)) + sdu·noise[ou : ou+D] and B[j] ← (v + h·(g·u − pv·Lv∘v)) + sdv·noise[ov : ov+D],
    u, v the old rows; ``Lu``, ``Lv``, ``noise`` contiguous 1-D float32 arrays (``Lu``, ``Lv`` of length ≥ D)."""
    n = _literal_length(D)
    if n is None or not (_is_rows(A) and _is_rows(B) and _are_scalars(h, g, pu, pv, sdu, sdv)):
        return None
    for a in (Lu, Lv, noise):
        if not (isinstance(a, types.Array) and a.ndim == 1 and a.dtype == types.float32 and a.layout == "C"):
            return None

    def codegen(context, builder, sig, args):
        c = step_chunk(n, 6)

        def start(k, pos, posty):
            return _element_pointer(context, builder, sig.args[k], args[k], pos, posty, n)

        pu0 = _row_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1], n)
        pv0 = _row_pointer(context, builder, sig.args[2], args[2], args[3], sig.args[3], n)
        zero = context.get_constant(types.intp, 0)
        lu0, lv0 = start(8, zero, types.intp), start(9, zero, types.intp)
        zu0, zv0 = start(12, args[13], sig.args[13]), start(12, args[14], sig.args[14])
        h, g, pu, pv, sdu, sdv = (_splat(builder, _scalar(context, builder, sig, args, k), c)
                                  for k in (4, 5, 6, 7, 10, 11))

        def step(x, y, p, lam, sd, z):
            prior = builder.fmul(builder.fmul(p, lam, flags=FAST), x, flags=FAST)
            grad = builder.fsub(builder.fmul(g, y, flags=FAST), prior, flags=FAST)
            moved = builder.fadd(x, builder.fmul(h, grad, flags=FAST), flags=FAST)
            return builder.fadd(moved, builder.fmul(sd, z, flags=FAST), flags=FAST)

        for q in range(n // c):  # see step_chunk: both rows' chunk q, loaded before either is stored
            pu_, pv_ = _chunk_pointer(builder, pu0, q, c), _chunk_pointer(builder, pv0, q, c)

            def chunk(p0):
                return builder.load(_chunk_pointer(builder, p0, q, c), align=4)

            u = builder.load(pu_, align=4)
            v = builder.load(pv_, align=4)
            lu, lv, zu, zv = chunk(lu0), chunk(lv0), chunk(zu0), chunk(zv0)
            builder.store(step(u, v, pu, lu, sdu, zu), pu_, align=4)
            builder.store(step(v, u, pv, lv, sdv, zv), pv_, align=4)
        return context.get_dummy_value()

    return types.void(A, i, B, j, h, g, pu, pv, Lu, Lv, sdu, sdv, noise, ou, ov, D), codegen
