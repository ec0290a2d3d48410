// Reductions over a whole workgroup for the GPU row kernels (*_sg.comp):
// subgroup arithmetic within each subgroup, then the subgroups' results
// combined in shared memory in subgroup order, so the order of a sum is fixed
// for a given subgroup size. Every invocation of the workgroup must call them
// (they hold barriers) and gets the result. No assumption on the subgroup
// size: the host sizes the workgroup to hold at most 64 subgroups of the
// smallest size a device may use (min(256, S^2) for its reported size S >= 4,
// src/ops/nn_util.h). Each combine loops gl_NumSubgroups <= 64 times.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

shared float wg_fpart[64];
shared uint wg_upart[64];

float workgroup_sum(float v)
{
    v = subgroupAdd(v);
    if (subgroupElect())
        wg_fpart[gl_SubgroupID] = v;
    barrier();
    float s = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
        s += wg_fpart[i];
    barrier(); // the parts are reused by the next reduction
    return s;
}

float workgroup_max(float v)
{
    v = subgroupMax(v);
    if (subgroupElect())
        wg_fpart[gl_SubgroupID] = v;
    barrier();
    float s = wg_fpart[0];
    for (uint i = 1u; i < gl_NumSubgroups; i++)
        s = max(s, wg_fpart[i]);
    barrier();
    return s;
}

uint workgroup_min(uint v)
{
    v = subgroupMin(v);
    if (subgroupElect())
        wg_upart[gl_SubgroupID] = v;
    barrier();
    uint s = wg_upart[0];
    for (uint i = 1u; i < gl_NumSubgroups; i++)
        s = min(s, wg_upart[i]);
    barrier();
    return s;
}
