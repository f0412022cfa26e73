; The LLVM 19 NVVM intrinsics the kernel dialect's fragment and copy ops
; map to (docs/dialects/kernel.md, "Code generation of the fragment and
; copy ops"), one call each, as an emitter should produce them: shared
; pointers in addrspace(3), global ones in addrspace(1), a vector<2xbf16>
; register as <2 x bfloat> bitcast to i32 for the bf16 mma, a
; vector<2xf16> as <2 x half>.
target triple = "nvptx64-nvidia-cuda"

@smem = external addrspace(3) global [0 x i8], align 16

declare i32 @llvm.nvvm.ldmatrix.sync.aligned.m8n8.x1.b16(ptr addrspace(3))
declare {i32, i32} @llvm.nvvm.ldmatrix.sync.aligned.m8n8.x2.trans.b16(ptr addrspace(3))
declare {i32, i32, i32, i32} @llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16(ptr addrspace(3))
declare {i32, i32, i32, i32} @llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.trans.b16(ptr addrspace(3))
declare void @llvm.nvvm.cp.async.cg.shared.global.16(ptr addrspace(3), ptr addrspace(1))
declare void @llvm.nvvm.cp.async.cg.shared.global.16.s(ptr addrspace(3), ptr addrspace(1), i32)
declare void @llvm.nvvm.cp.async.commit.group()
declare void @llvm.nvvm.cp.async.wait.group(i32 immarg)
declare {float, float, float, float} @llvm.nvvm.mma.m16n8k16.row.col.bf16(i32, i32, i32, i32, i32, i32, float, float, float, float)
declare {float, float, float, float} @llvm.nvvm.mma.m16n8k16.row.col.f32.f32(<2 x half>, <2 x half>, <2 x half>, <2 x half>, <2 x half>, <2 x half>, float, float, float, float)

define ptx_kernel void @frag(ptr addrspace(1) noalias readonly %g, ptr addrspace(1) noalias %out, i64 %srcBytes) {
  %s = getelementptr inbounds i8, ptr addrspace(3) @smem, i32 0
  ; kernel.cp_async %s[..], %g[..]  and  ..., %srcBytes (index: truncated)
  call void @llvm.nvvm.cp.async.cg.shared.global.16(ptr addrspace(3) %s, ptr addrspace(1) %g)
  %n = trunc i64 %srcBytes to i32
  call void @llvm.nvvm.cp.async.cg.shared.global.16.s(ptr addrspace(3) %s, ptr addrspace(1) %g, i32 %n)
  ; kernel.cp_async_commit, kernel.cp_async_wait 2
  call void @llvm.nvvm.cp.async.commit.group()
  call void @llvm.nvvm.cp.async.wait.group(i32 2)
  ; kernel.ldmatrix x4 / x4 trans / x2 trans / x1
  %a = call {i32, i32, i32, i32} @llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16(ptr addrspace(3) %s)
  %t = call {i32, i32, i32, i32} @llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.trans.b16(ptr addrspace(3) %s)
  %b = call {i32, i32} @llvm.nvvm.ldmatrix.sync.aligned.m8n8.x2.trans.b16(ptr addrspace(3) %s)
  %x1 = call i32 @llvm.nvvm.ldmatrix.sync.aligned.m8n8.x1.b16(ptr addrspace(3) %s)
  %a0 = extractvalue {i32, i32, i32, i32} %a, 0
  %a1 = extractvalue {i32, i32, i32, i32} %a, 1
  %a2 = extractvalue {i32, i32, i32, i32} %a, 2
  %a3 = extractvalue {i32, i32, i32, i32} %a, 3
  %b0 = extractvalue {i32, i32} %b, 0
  %b1 = extractvalue {i32, i32} %b, 1
  ; kernel.mma m16n8k16 (bf16): registers as i32
  %d = call {float, float, float, float} @llvm.nvvm.mma.m16n8k16.row.col.bf16(i32 %a0, i32 %a1, i32 %a2, i32 %a3, i32 %b0, i32 %b1, float 0.0, float 0.0, float 0.0, float 0.0)
  ; kernel.mma m16n8k16 (f16): registers as <2 x half>
  %h0 = bitcast i32 %a0 to <2 x half>
  %h1 = bitcast i32 %b0 to <2 x half>
  %e = call {float, float, float, float} @llvm.nvvm.mma.m16n8k16.row.col.f32.f32(<2 x half> %h0, <2 x half> %h0, <2 x half> %h0, <2 x half> %h0, <2 x half> %h1, <2 x half> %h1, float 0.0, float 0.0, float 0.0, float 0.0)
  ; kernel.extract %d0[1], then kernel.from_elements of two bf16 for a
  ; 4-byte kernel.vector_store
  %d1 = extractvalue {float, float, float, float} %d, 1
  %e0 = extractvalue {float, float, float, float} %e, 0
  %lo = fptrunc float %d1 to bfloat
  %hi = fptrunc float %e0 to bfloat
  %v0 = insertelement <2 x bfloat> poison, bfloat %lo, i32 0
  %v1 = insertelement <2 x bfloat> %v0, bfloat %hi, i32 1
  store <2 x bfloat> %v1, ptr addrspace(1) %out, align 4
  %tt = extractvalue {i32, i32, i32, i32} %t, 3
  %sum = add i32 %tt, %x1
  %o2 = getelementptr inbounds i32, ptr addrspace(1) %out, i64 1
  store i32 %sum, ptr addrspace(1) %o2, align 4
  ret void
}
