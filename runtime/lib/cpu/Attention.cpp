//===- Attention.cpp - scaled dot-product attention -----------------------===//
//
// One query row at a time: its scores against every key, the masked softmax
// (as masked_softmax computes it), and the weighted sum of the values. Only
// each row's logsumexp is kept; the gradient recomputes the probabilities
// from it, so no T x T tensor outlives a row.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "Indexing.h"
#include "VectorMath.h"

#include <cmath>
#include <vector>

namespace fsdpc::runtime::cpu {

namespace {

/// Sizes and strides of one attention call.
struct AttentionLayout {
  int64_t batch = 1, tq = 0, tk = 0, d = 0, dv = 0;
  bool keyTransposed = false;
  std::vector<int64_t> maskBase; // per batch index: the mask's offset
  int64_t maskRowStride = 0, maskColStride = 0;

  float key(const float *k, int64_t b, int64_t j, int64_t c) const {
    return keyTransposed ? k[(b * d + c) * tk + j] : k[(b * tk + j) * d + c];
  }
  float &key(float *k, int64_t b, int64_t j, int64_t c) const {
    return keyTransposed ? k[(b * d + c) * tk + j] : k[(b * tk + j) * d + c];
  }
};

Status attentionLayout(const KernelCall &call, AttentionLayout &l) {
  const TensorView &q = call.inputs[0], &k = call.inputs[1], &v = call.inputs[2], &mask = call.inputs[3];
  size_t rank = q.shape.size();
  l.keyTransposed = call.intParam(contract::Param::kKeyTransposed, 0);
  if (rank < 2 || k.shape.size() != rank || v.shape.size() != rank)
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": query, key and value need one rank of 2 or more");
  l.tq = q.shape[rank - 2];
  l.d = q.shape[rank - 1];
  l.tk = l.keyTransposed ? k.shape[rank - 1] : k.shape[rank - 2];
  l.dv = v.shape[rank - 1];
  std::vector<int64_t> scores(q.shape.begin(), q.shape.end() - 2);
  l.batch = elementCount(scores);
  scores.push_back(l.tq);
  scores.push_back(l.tk);
  if (!broadcastsTo(mask.shape, scores))
    return FSDPC_ERROR(kInvalidArgument, call.instruction->op(), ": mask ", shapeString(mask.shape),
                       " does not broadcast to the scores ", shapeString(scores));
  std::vector<int64_t> strides = broadcastStrides(mask.shape, scores);
  l.maskRowStride = strides[rank - 2];
  l.maskColStride = strides[rank - 1];
  l.maskBase.resize(l.batch);
  for (int64_t b = 0; b < l.batch; ++b) {
    int64_t rest = b, offset = 0;
    for (size_t axis = rank - 2; axis-- > 0;) {
      offset += (rest % scores[axis]) * strides[axis];
      rest /= scores[axis];
    }
    l.maskBase[b] = offset;
  }
  return Status::ok();
}

/// Query row i of batch b: its scaled, masked scores into `s`; returns the
/// largest.
float rowScores(const AttentionLayout &l, const float *q, const float *k, const int64_t *mask, float scale, int64_t b,
                int64_t i, float *s) {
  const float *qi = q + (b * l.tq + i) * l.d;
  const int64_t *maskRow = mask + l.maskBase[b] + i * l.maskRowStride;
  float maxValue = -INFINITY;
  for (int64_t j = 0; j < l.tk; ++j) {
    if (maskRow[j * l.maskColStride]) {
      s[j] = -INFINITY;
      continue;
    }
    float dot = 0;
    for (int64_t c = 0; c < l.d; ++c)
      dot += qi[c] * l.key(k, b, j, c);
    s[j] = dot * scale;
    maxValue = std::max(maxValue, s[j]);
  }
  return maxValue;
}

} // namespace

Status attention(const KernelCall &call) {
  AttentionLayout l;
  FSDPC_RETURN_IF_ERROR(attentionLayout(call, l));
  const float *q = call.inputs[0].f32(), *k = call.inputs[1].f32(), *v = call.inputs[2].f32();
  const int64_t *mask = call.inputs[3].i64();
  float *out = call.outputs[0].f32(), *lse = call.outputs[1].f32();
  const float scale = static_cast<float>(call.floatParam(contract::Param::kScale, 1.0));
#pragma omp parallel
  {
    std::vector<float> p(l.tk);
#pragma omp for collapse(2)
    for (int64_t b = 0; b < l.batch; ++b)
      for (int64_t i = 0; i < l.tq; ++i) {
        float maxValue = rowScores(l, q, k, mask, scale, b, i, p.data());
        double sum = 0;
        for (int64_t j = 0; j < l.tk; ++j) {
          p[j] = vectorExp(p[j] - maxValue);
          sum += p[j];
        }
        const float inv = static_cast<float>(1.0 / sum);
        float *o = out + (b * l.tq + i) * l.dv;
        for (int64_t c = 0; c < l.dv; ++c)
          o[c] = 0;
        for (int64_t j = 0; j < l.tk; ++j) {
          float pj = p[j] * inv;
          if (pj == 0)
            continue;
          const float *vj = v + (b * l.tk + j) * l.dv;
          for (int64_t c = 0; c < l.dv; ++c)
            o[c] += pj * vj[c];
        }
        lse[b * l.tq + i] = maxValue + static_cast<float>(std::log(sum));
      }
  }
  return Status::ok();
}

Status attentionGrad(const KernelCall &call) {
  AttentionLayout l;
  FSDPC_RETURN_IF_ERROR(attentionLayout(call, l));
  const float *q = call.inputs[0].f32(), *k = call.inputs[1].f32(), *v = call.inputs[2].f32();
  const int64_t *mask = call.inputs[3].i64();
  const float *out = call.inputs[4].f32(), *lse = call.inputs[5].f32(), *dout = call.inputs[6].f32();
  float *dq = call.outputs[0].f32(), *dk = call.outputs[1].f32(), *dv = call.outputs[2].f32();
  const float scale = static_cast<float>(call.floatParam(contract::Param::kScale, 1.0));
  // Each batch index owns its slices of dkey and dvalue.
#pragma omp parallel
  {
    std::vector<float> p(l.tk);
#pragma omp for
    for (int64_t b = 0; b < l.batch; ++b) {
      for (int64_t j = 0; j < l.tk; ++j) {
        for (int64_t c = 0; c < l.d; ++c)
          l.key(dk, b, j, c) = 0;
        for (int64_t c = 0; c < l.dv; ++c)
          dv[(b * l.tk + j) * l.dv + c] = 0;
      }
      for (int64_t i = 0; i < l.tq; ++i) {
        rowScores(l, q, k, mask, scale, b, i, p.data());
        const float rowLse = lse[b * l.tq + i];
        const float *doi = dout + (b * l.tq + i) * l.dv, *oi = out + (b * l.tq + i) * l.dv;
        const float *qi = q + (b * l.tq + i) * l.d;
        float *dqi = dq + (b * l.tq + i) * l.d;
        float rowDot = 0; // sum over the row of dout * out = sum_j p_j dP_j
        for (int64_t c = 0; c < l.dv; ++c)
          rowDot += doi[c] * oi[c];
        for (int64_t c = 0; c < l.d; ++c)
          dqi[c] = 0;
        for (int64_t j = 0; j < l.tk; ++j) {
          float pj = vectorExp(p[j] - rowLse); // 0 where masked
          if (pj == 0)
            continue;
          const float *vj = v + (b * l.tk + j) * l.dv;
          float *dvj = dv + (b * l.tk + j) * l.dv;
          float dp = 0;
          for (int64_t c = 0; c < l.dv; ++c) {
            dp += doi[c] * vj[c];
            dvj[c] += pj * doi[c];
          }
          float ds = pj * (dp - rowDot) * scale;
          for (int64_t c = 0; c < l.d; ++c) {
            dqi[c] += ds * l.key(k, b, j, c);
            l.key(dk, b, j, c) += ds * qi[c];
          }
        }
      }
    }
  }
  return Status::ok();
}

} // namespace fsdpc::runtime::cpu
