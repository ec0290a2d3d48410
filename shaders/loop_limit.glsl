// llvmpipe (lavapipe, Mesa 22) ends every loop of a shader invocation once the
// invocation has taken 65535 loop iterations in total, over all its loops
// (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS), silently. Kernels therefore bound
// the loop iterations of one invocation by TMM_MAX_LOOP and let the host split
// longer work into passes (see src/ops/reduce.c).
#define TMM_MAX_LOOP 4096u
