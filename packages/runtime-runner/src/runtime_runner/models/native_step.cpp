// A Llama-family decoder's whole forward over a batch of rows in one call, on a CPU.
//
// Op by op from Python, a batch-1 decode step of the default model is about 400 small calls, each
// paying Python's and torch's dispatch: more time than reading every weight once. Here the layer
// loop runs in C++ and calls, in the same order and with the same operands, the very kernels the
// op-by-op forward calls (through their C entries, whose addresses the Python side hands over):
// each projection through the native projection ABI, the fused norm / SiLU-and-mul / rotary ops of
// cpu_fused_ops.cpp, and the attention backend's native entry. So a row's bits are those of the
// op-by-op forward, and batch invariance carries over unchanged. This file computes nothing itself
// but the copies of new keys and values into the pool (rounded to bf16, as torch rounds, where a
// float32 model keeps a bf16 pool).
//
// Per layer, as DecoderForCausalLM.hidden_states runs it:
//   qkv = qkv_proj(x)
//   q, k: per-head RMSNorm (families with q/k norms) then rotary; else rotary over q and k in place
//   pool[layer][:, slot] = k, v of each row
//   attn = attention(q)
//   h, x = add_rms_norm(h, o_proj(attn), post_norm)
//   h, x = add_rms_norm(h, down(silu_mul(gate_up(x))), next_norm)     (the final norm after the last)

#include <cstdint>
#include <native_build/bf16_bits.h>
#include <cstring>

namespace {

using Projection = void (*)(const void* matrix, const void* x, int64_t ldx, int64_t rows, void* out, int64_t threads);
using AddRmsNorm = void (*)(const void* x, int64_t x_outer, int64_t x_inner, const void* delta, int64_t d_outer,
                            int64_t d_inner, const void* weight, void* sum, void* out, int64_t outer, int64_t inner,
                            int64_t cols, double eps, int64_t threads);
using SiluMul = void (*)(const void* gate_up, int64_t stride, void* out, int64_t rows, int64_t inter, int64_t threads);
using Rope = void (*)(void* x, int64_t x_outer, int64_t x_inner, const void* cos, const void* sin, int64_t table_stride,
                      int64_t outer, int64_t inner, int64_t d, int64_t threads);
using Attention = void (*)(const void* plan, const void* q, int64_t q_row_stride, int64_t q_head_stride,
                           const void* k_pool, const void* v_pool, int64_t kv_head_stride, int64_t kv_slot_stride,
                           int64_t heads, int64_t kv_heads, int64_t head_dim, double scale, int64_t threads, void* out);

struct ProjectionCall {
    Projection entry;
    const void* matrix;
};

// One decoder layer: its projections, its norms' weights and its slice of the KV pool.
struct Layer {
    ProjectionCall qkv, o, gate_up, down;
    const void* q_norm;  // null unless the family norms q and k per head (then k_norm is set too)
    const void* k_norm;
    const void* post_norm;
    const void* next_norm;  // the next layer's input norm, or the final norm after the last layer
    void* k_pool;           // [kv_heads, slots, head_dim]
    void* v_pool;
};

// What is fixed once the model is loaded.
struct Model {
    int64_t layers, hidden, heads, kv_heads, head_dim, intermediate, element_size;
    int64_t kv_element_size;                 // the pools': element_size, or 2 for a bf16 pool under fp32
    int64_t kv_head_stride, kv_slot_stride;  // the pools' strides, in elements
    double eps, scale;
    AddRmsNorm add_rms_norm;
    SiluMul silu_mul;
    Rope rope;
    const Layer* layer;
};

// One forward: its rows, their rotary rows and KV slots, the planned attention, and the buffers.
struct Step {
    int64_t rows, threads;
    void* h;                 // [rows, hidden]: the embeddings in, the residual stream after
    void* x;                 // [rows, hidden]: the final-normed hidden states out
    const void* first_norm;  // the first layer's input norm
    const void* cos;         // [rows, head_dim]: each row's rotary tables
    const void* sin;
    const int64_t* slots;    // [rows]: each row's KV slot
    Attention attend;
    const void* attention_plan;
    void* qkv;               // [rows, (heads + 2 kv_heads) head_dim]
    void* q_normed;          // [rows, heads, head_dim] (families with q/k norms)
    void* k_normed;          // [rows, kv_heads, head_dim]
    void* attn;              // [rows, heads * head_dim]
    void* delta;             // [rows, hidden]: a projection back onto the residual stream
    void* gate_up;           // [rows, 2 intermediate]
    void* act;               // [rows, intermediate]
};

inline char* at(void* base, int64_t elements, int64_t element_size) {
    return static_cast<char*>(base) + elements * element_size;
}

// One head's row into the pool: copied, or rounded to bf16 where the pool is narrower.
void store_row(const Model& m, void* pool, int64_t at_element, const char* row) {
    if (m.kv_element_size == m.element_size) {
        std::memcpy(at(pool, at_element, m.element_size), row, m.head_dim * m.element_size);
        return;
    }
    const float* from = reinterpret_cast<const float*>(row);
    uint16_t* to = reinterpret_cast<uint16_t*>(at(pool, at_element, m.kv_element_size));
    for (int64_t i = 0; i < m.head_dim; ++i) to[i] = native_build::bf16_bits_of(from[i]);
}

// Each row's keys and values ([rows, kv_heads, head_dim] at the given row strides) into its slot.
void write_kv(const Model& m, const Layer& l, const Step& s, const char* k, int64_t k_row, const char* v, int64_t v_row) {
    for (int64_t r = 0; r < s.rows; ++r)
        for (int64_t h = 0; h < m.kv_heads; ++h) {
            const int64_t pool = h * m.kv_head_stride + s.slots[r] * m.kv_slot_stride;
            store_row(m, l.k_pool, pool, k + (r * k_row + h * m.head_dim) * m.element_size);
            store_row(m, l.v_pool, pool, v + (r * v_row + h * m.head_dim) * m.element_size);
        }
}

void layer_forward(const Model& m, const Layer& l, const Step& s) {
    const int64_t d = m.head_dim, width = (m.heads + 2 * m.kv_heads) * d, es = m.element_size, n = s.rows, t = s.threads;
    l.qkv.entry(l.qkv.matrix, s.x, m.hidden, n, s.qkv, t);
    char* qkv = static_cast<char*>(s.qkv);
    const char *q, *k, *v = qkv + (m.heads + m.kv_heads) * d * es;
    int64_t q_row, k_row;
    if (l.q_norm != nullptr) {
        m.add_rms_norm(qkv, width, d, nullptr, 0, 0, l.q_norm, nullptr, s.q_normed, n, m.heads, d, m.eps, t);
        m.rope(s.q_normed, m.heads * d, d, s.cos, s.sin, d, n, m.heads, d, t);
        m.add_rms_norm(qkv + m.heads * d * es, width, d, nullptr, 0, 0, l.k_norm, nullptr, s.k_normed, n, m.kv_heads, d,
                       m.eps, t);
        m.rope(s.k_normed, m.kv_heads * d, d, s.cos, s.sin, d, n, m.kv_heads, d, t);
        q = static_cast<const char*>(s.q_normed), q_row = m.heads * d;
        k = static_cast<const char*>(s.k_normed), k_row = m.kv_heads * d;
    } else {
        m.rope(qkv, width, d, s.cos, s.sin, d, n, m.heads + m.kv_heads, d, t);
        q = qkv, q_row = width;
        k = qkv + m.heads * d * es, k_row = width;
    }
    write_kv(m, l, s, k, k_row, v, width);
    s.attend(s.attention_plan, q, q_row, d, l.k_pool, l.v_pool, m.kv_head_stride, m.kv_slot_stride, m.heads, m.kv_heads,
             d, m.scale, t, s.attn);
    l.o.entry(l.o.matrix, s.attn, m.heads * d, n, s.delta, t);
    m.add_rms_norm(s.h, m.hidden, 0, s.delta, m.hidden, 0, l.post_norm, s.h, s.x, n, 1, m.hidden, m.eps, t);
    l.gate_up.entry(l.gate_up.matrix, s.x, m.hidden, n, s.gate_up, t);
    m.silu_mul(s.gate_up, 2 * m.intermediate, s.act, n, m.intermediate, t);
    l.down.entry(l.down.matrix, s.act, m.intermediate, n, s.delta, t);
    m.add_rms_norm(s.h, m.hidden, 0, s.delta, m.hidden, 0, l.next_norm, s.h, s.x, n, 1, m.hidden, m.eps, t);
}

}  // namespace

// The final-normed hidden states of the step's rows into s.x; h holds their embeddings on entry.
extern "C" void native_decoder_forward(const void* model, const void* step) {
    const Model& m = *static_cast<const Model*>(model);
    const Step& s = *static_cast<const Step*>(step);
    m.add_rms_norm(s.h, m.hidden, 0, nullptr, 0, 0, s.first_norm, nullptr, s.x, s.rows, 1, m.hidden, m.eps, s.threads);
    for (int64_t i = 0; i < m.layers; ++i) layer_forward(m, m.layer[i], s);
}
