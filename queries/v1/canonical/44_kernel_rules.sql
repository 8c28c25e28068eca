-- @defines kernel_rules

-- nsysql canonical schema v1: rules that name what a kernel does and whether it runs on tensor cores.
--
-- Data, not code: one row per rule. A kernel takes the first rule, by `priority`, whose `pattern` (an RE2
-- regular expression in lowercase, matched anywhere in the kernel's lowercased demangled name) matches; a
-- kernel no rule matches is `other` / `unknown` (45_kernel_classes.sql). Categories: gemm, conv, attention, norm, softmax,
-- elementwise, reduction, optimizer, copy, communication, sort_scan, other. tensor_cores: yes, no, unknown.
--
-- Names lie in both directions, hence the order: instruction tokens that exist only on tensor cores (HMMA,
-- IMMA, WGMMA/GMMA, TensorOp, xmma's `tensorMxNxK`, cuBLAS's h884/s1688/s16816/i8816 shapes, tf32, cuBLAS's
-- nvjet family) decide `yes` before any word that sounds like a matrix product; `xmma` alone proves nothing
-- (`sm80_xmma_gemm_f32f32_f32f32_f32_..._ffma_...` is cuBLAS's FFMA kernel on CUDA cores), nor does `sgemm`
-- (SIMT single precision). Kernels that multiply no matrices (elementwise, reductions, copies, collectives)
-- have nothing to run on tensor cores: `no`. Generated code (Triton, nvFuser) names its fusion, not its
-- instructions: `unknown`.
CREATE OR REPLACE TABLE kernel_rules AS
SELECT
  -- the order rules are tried in: the first whose pattern matches decides
  priority,
  -- RE2 regular expression, lowercase, matched anywhere in the lowercased demangled kernel name
  pattern,
  -- what a kernel it matches does (the categories above)
  category,
  -- yes, no or unknown: whether a kernel it matches runs on tensor cores, by its name
  tensor_cores,
  -- why the rule says so: which kernels it is written for
  why
FROM (VALUES
  -- collectives first: their names say reduce/gather, which the reduction and elementwise rules would take
  (10, 'nccl', 'communication', 'no', 'NCCL collectives and point-to-point (ncclDevKernel_*, ncclKernel_*)'),
  (11, 'cross_device_reduce|custom_?all_?reduce|nvshmem|all_?to_?all', 'communication', 'no',
       'collectives outside NCCL (vLLM custom all-reduce, NVSHMEM, all-to-all)'),
  -- attention before matrix products: fused attention kernels say gemm, mma, softmax
  -- FlashAttention's helpers multiply no matrices of their own (the split-KV combine, the dQ/dKV conversion, the
  -- rowwise dot(dO, O), the clearing of accumulators, FA3's pre- and post-processing): the name proves no MMA
  (19, 'flash.*(combine|convert_?d|dot_do_o|clear_|preprocess|postprocess)', 'attention', 'unknown',
       'FlashAttention helper kernels (flash_fwd_splitkv_combine_kernel, flash_bwd_convert_dq_kernel, '
       || 'flash_bwd_dot_do_o_kernel, FlashAttnBwdPreprocess)'),
  -- not FlashInfer (`flash` then `infer`): its decode kernels run on CUDA cores, its norm, sampling and activation
  -- kernels are no attention (the later rules take them)
  (20, 'flash([^i]|$)|_sdpa_', 'attention', 'yes',
       'FlashAttention and cuDNN SDPA flash kernels exist only for fp16/bf16/fp8 on tensor cores'),
  (21, 'fmha|attention|attn|(batch|single)(prefill|decode)with', 'attention', 'unknown',
       'memory-efficient attention has fp32 SIMT variants, FlashInfer''s decode kernels run on CUDA cores and its '
       || 'prefill kernels on tensor cores: the name alone does not say'),
  -- pooling before `xmma`: TensorRT names its pooling kernels sm50_xmma_pooling_*
  (25, 'pool', 'reduction', 'no', 'pooling: a windowed max or mean, no matrix product'),
  -- convolutions before gemm: cuDNN names them implicit_gemm, convolve_sgemm
  (30, '(conv(olution|olve|_?[123]d|_depthwise|_transpose)|fprop|dgrad|wgrad|cudnn.*winograd)'
       || '.*(hmma|imma|wgmma|gmma|tensorop|tensor[0-9]+x[0-9]+x[0-9]+|tf32|(^|_)[hsi](884|1688|16816|16832|8816))'
       || '|(hmma|imma|wgmma|gmma|tensorop|tensor[0-9]+x[0-9]+x[0-9]+|tf32|(^|_)[hsi](884|1688|16816|16832|8816))'
       || '.*(conv(olution|olve|_?[123]d)|fprop|dgrad|wgrad)'
       -- cuDNN's pre-Ampere tensor-core convolutions name the MMA shape, then cudnn: volta_h884cudnn_*, turing_fp16_s1688cudnn_*
       || '|(^|_)[hsi](884|1688|16816|16832|8816)cudnn', 'conv', 'yes',
       'convolution with a tensor-core instruction token (xmma fprop/dgrad/wgrad tensor16x8x16, volta_h884cudnn, '
       || 'turing_fp16_s1688cudnn)'),
  -- cuDNN names its CUDA-core convolutions by their type before `cudnn`: scudnn (fp32), dcudnn (fp64), icudnn
  -- (int8x4: DP4A, as volta_int8x4_icudnn_* and trt_ampere_fp32_icudnn_int8x4_*); their `relu` is a fused epilogue
  (31, '(^|[^a-z0-9])[sdi]cudnn|convolve_sgemm|winograd|im2col|col2im|conv_depthwise|slow_conv|fft2d_[rc]2[rc]|flip_filter'
       -- a convolution whose name gives a CUDA-core instruction: xmma's FFMA kernels (sm80_xmma_fprop_..._ffma_)
       || '|(conv(olution|olve|_?[123]d)|fprop|dgrad|wgrad).*(ffma|simt)|(ffma|simt).*(conv(olution|olve|_?[123]d)'
       || '|fprop|dgrad|wgrad)',
       'conv', 'no', 'convolution on CUDA cores: cuDNN SIMT kernels (scudnn, dcudnn, icudnn int8x4, '
       || 'implicit/explicit_convolve_sgemm),'
       || ' xmma fprop/dgrad/wgrad with ffma, Winograd and FFT transforms, im2col, PyTorch''s own depthwise and slow'
       || ' convolutions'),
  -- as for matrix products (rule 50): xmma convolutions of 16- or 8-bit inputs exist only on tensor cores; Hopper's
  -- (sm90_xmma_dgrad_..._bf16bf16_..._warpgroupsize) name no instruction token
  (32, 'xmma_(fprop|dgrad|wgrad)_[a-z_]*(bf16|f16|e4m3|e5m2|i8|s8)', 'conv', 'yes',
       'cuDNN xmma convolutions of 16- or 8-bit inputs (sm90_xmma_dgrad_implicit_gemm_bf16bf16_*)'),
  (33, 'conv(olution|olve|_?[123]d|_depthwise|_transpose)|fprop|dgrad|wgrad|(^|[^a-z0-9])hcudnn', 'conv', 'unknown',
       'convolution whose name has no instruction token'),
  -- generated code: the prefix says the kind of fusion, never the instructions
  (35, '^triton_(tem|.*_mm|.*bmm)', 'gemm', 'unknown', 'Triton template matmul (Inductor mm/bmm templates)'),
  (36, '^triton_poi', 'elementwise', 'unknown', 'Triton pointwise kernel (Inductor)'),
  (37, '^triton_(red|per)', 'reduction', 'unknown', 'Triton reduction or persistent reduction (Inductor)'),
  (38, '^triton', 'other', 'unknown', 'other Triton kernel: the name says nothing of what it computes'),
  (39, 'nvfuser_pointwise', 'elementwise', 'unknown', 'nvFuser pointwise fusion'),
  (40, 'nvfuser_(reduction|inner_persistent|outer_persistent|inner_outer)', 'reduction', 'unknown',
       'nvFuser reduction or normalization fusion'),
  (41, 'nvfuser', 'other', 'unknown', 'other nvFuser kernel'),
  -- matrix products: a tensor-core token decides yes before anything else
  (50, 'hmma|imma|wgmma|gmma|wmma|tensorop|tensor[0-9]+x[0-9]+x[0-9]+|tf32|(^|_)[hsi](884|1688|16816|16832|8816)'
       || '|nvjet|xmma_gemm_(bf16|f16|e4m3|e5m2|i8|s8)', 'gemm', 'yes', 'tensor-core instruction or kernel family: '
       || 'HMMA/IMMA/WGMMA, CUDA''s WMMA API, CUTLASS TensorOp, xmma tensorMxNxK, cuBLAS h884/s1688/s16816/i8816 shapes, tf32, '
       || 'cuBLAS nvjet (Hopper and later), cuBLAS xmma GEMMs of 16- or 8-bit inputs'),
  -- fp64 (dgemm, zgemm) only where the kernel is named for a GPU without DMMA: on sm80 and later cuBLAS's fp64
  -- products may run on tensor cores (rule 53)
  (51, 'ffma|simt|sgemm|cgemm|(kepler|maxwell|pascal|volta|turing)_[a-z0-9_]*[dz]gemm|gemmsn|gemv|gemmk1', 'gemm',
       'no', 'matrix product on CUDA cores: FFMA xmma kernels, CUTLASS simt, SIMT s/cgemm, pre-Ampere d/zgemm, gemv'),
  (52, 'splitkreduce|cublaslt::epilogue|scal_kernel|compute_gemm_pointers|cudnn::gemm', 'gemm', 'no',
       'cuBLAS/cuDNN helpers of a matrix product (split-K reduction, epilogue, beta scaling, pointers)'),
  (53, 'gemm|matmul|xmma|cutlass|cublas|(^|[^a-z])b?mm([^a-z]|$)', 'gemm', 'unknown',
       'matrix product whose name has no instruction token (dgemm may use DMMA on sm80 and later)'),
  -- the rest multiply no matrices: nothing to put on tensor cores
  -- a Hadamard transform (QuaRot, fast-hadamard-transform, HadaCore) says `adam`: no optimizer, and its kernels
  -- run on CUDA cores or on tensor cores (HadaCore)
  (59, 'hadamard', 'other', 'unknown', 'Hadamard transforms: butterflies on CUDA cores, or MMA (HadaCore)'),
  (60, 'multi_tensor_apply|adam|fused_sgd|sgd_kernel|adagrad|rmsprop|lamb_(stage|kernel)', 'optimizer', 'no',
       'optimizer step (PyTorch foreach/fused multi_tensor_apply: Adam, SGD; apex fused optimizers)'),
  (61, 'softmax', 'softmax', 'no', 'softmax and log-softmax, forward and backward'),
  (62, 'layer_?norm|batch_?norm|group_?norm|instance_?norm|rms_?norm|gammabetabackward|welford|normalization'
       || '|(^|[^a-z])bn_', 'norm', 'no', 'normalization layers (GammaBetaBackward is layer norm''s backward, '
       || 'Welford the batch-norm statistics)'),
  (63, 'memcpy|memset|copy|transpose|permut|reformat|catarray|fillfunctor|fill_kernel|cupy_fill'
       -- layout conversions: nchwToNhwc, nhwcToNchw, TensorRT's nchwToNchhw2 (int8 packing)
       || '|(nchw|nhwc|nchhw2?)to(nchw|nhwc|nchhw)', 'copy', 'no', 'kernels that move or fill memory: copies, casts by copy, concatenation, '
       || 'layout transposes, fill_/zero_'),
  (64, 'radix|sort|(^|[^a-z])scan|devicescan|deviceselect|cumsum|cumprod', 'sort_scan', 'no',
       'sorting and prefix scans (CUB radix sort, DeviceScan/Select, cumsum)'),
  (65, 'reduce|reduction|nll_loss|cross_entropy|argmax|argmin|histogram', 'reduction', 'no',
       'reductions: at::native::reduce_kernel (sum, mean, norms), CUB reductions, losses'),
  -- `gpu_kernel` as PyTorch's at::native::gpu_kernel_impl, not the end of a program's own name (spmv_gpu_kernel)
  (66, 'elementwise|pointwise|vectorized|unrolled|(^|[^a-z0-9_])gpu_kernel|^cupy_|relu|gelu|silu|sigmoid|tanh|dropout|clamp'
       || '|where|index|gather|scatter|embedding|arange|saxpy|axpy|vec_?add|vector_?(add|mul)', 'elementwise',
       'no', 'one value out per value in: PyTorch TensorIterator kernels, activations, indexing, axpy')
) t(priority, pattern, category, tensor_cores, why);
