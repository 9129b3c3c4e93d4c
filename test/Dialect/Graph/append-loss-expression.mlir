// RUN: fsdp-opt %s -graph-append-loss | FileCheck %s
// RUN: fsdp-opt %s -graph-append-loss 2>&1 >/dev/null | FileCheck %s --check-prefix=WARN
// RUN: fsdp-opt %s -graph-append-loss="loss='(cross_entropy(start_logits, start_positions) + cross_entropy(end_logits, end_positions)) / 2'" | FileCheck %s --check-prefix=QA
// RUN: fsdp-opt %s -graph-append-loss="loss='cross_entropy(start_logits, y) + 0.3 * cross_entropy(end_logits, y) - cross_entropy(start_logits,y)/4'" | FileCheck %s --check-prefix=SHARED
// RUN: fsdp-opt %s -graph-append-loss="loss='mse(start_logits, target) + 2 * output(aux_loss)'" | FileCheck %s --check-prefix=AUX
// RUN: fsdp-opt %s -graph-append-loss="loss='(cross_entropy(start_logits, start_positions) + cross_entropy(end_logits, end_positions)) / 2'" -graph-mixed-precision | FileCheck %s --check-prefix=MIXED
// RUN: fsdp-opt %s -graph-append-loss="loss='(cross_entropy(start_logits, y) + cross_entropy(end_logits, y)) / 2' loss-mean=global ranks=2 micro-batches=3" | FileCheck %s --check-prefix=GLOBAL

// graph-append-loss with a --loss expression: the weighted sums of losses
// that torch training loops write.

// Tests that a weighted sum of losses over several outputs (a question-
// answering head: `(start_loss + end_loss) / 2`) scales and adds the terms,
// each with its own labels input, and is a `combined` loss; a bare
// `cross_entropy` reads the first output and warns that there are others.
// WARN: warning: graph-append-loss: the loss reads the first of the model's 3 outputs, 'start_logits'
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[LABELS:[^:]*]]: tensor<4xi64> {graph.input = "labels", graph.label}) -> (tensor<f32> {graph.loss})
// CHECK: graph.softmax_cross_entropy %{{.*}}, %[[LABELS]]
// QA: module attributes {graph.loss_kind = "combined", graph.num_classes = 0 : i64}
// QA-LABEL: func.func @train_step
// QA-SAME: %[[START:[^:]*]]: tensor<4xi64> {graph.input = "start_positions", graph.label}, %[[END:[^:]*]]: tensor<4xi64> {graph.input = "end_positions", graph.label}) -> (tensor<f32> {graph.loss})
// QA: %[[S:.*]] = graph.slice %{{.*}} {graph.prediction = "start_logits"
// QA: %[[E:.*]] = graph.slice %{{.*}} {starts
// QA: %[[CS:.*]] = graph.softmax_cross_entropy %[[S]], %[[START]] {ignore_index = -100 : i64}
// QA: %[[WS:.*]] = graph.scale %[[CS]] {factor = 5.000000e-01 : f64}
// QA: %[[CE:.*]] = graph.softmax_cross_entropy %[[E]], %[[END]] {ignore_index = -100 : i64}
// QA: %[[WE:.*]] = graph.scale %[[CE]] {factor = 5.000000e-01 : f64}
// QA: %[[SUM:.*]] = graph.add %[[WS]], %[[WE]]
// QA: return %[[SUM]] : tensor<f32>
// Under mixed precision the terms and their sum stay f32, as torch's
// cross entropy returns f32 under autocast (bf16 would round the loss).
// MIXED-LABEL: func.func @train_step
// MIXED: %[[CS:.*]] = graph.softmax_cross_entropy %{{.*}}, %{{.*}} {ignore_index = -100 : i64} : (tensor<4x6xbf16>, tensor<4xi64>) -> tensor<f32>
// MIXED-NEXT: %[[WS:.*]] = graph.scale %[[CS]] {factor = 5.000000e-01 : f64} : tensor<f32>
// MIXED-NEXT: %[[CE:.*]] = graph.softmax_cross_entropy %{{.*}}, %{{.*}} {ignore_index = -100 : i64} : (tensor<4x6xbf16>, tensor<4xi64>) -> tensor<f32>
// MIXED-NEXT: %[[WE:.*]] = graph.scale %[[CE]] {factor = 5.000000e-01 : f64} : tensor<f32>
// MIXED-NEXT: %[[SUM:.*]] = graph.add %[[WS]], %[[WE]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// MIXED-NEXT: return %[[SUM]] : tensor<f32>
// --loss-mean global (transformers' Trainer): each cross entropy's sum over
// its counted labels, times the 2 ranks and 3 micro-batches whose
// gradients the step averages, divided by the labels' count over the step
// (an i64 argument the runtime writes; one per labels, read once as f32).
// GLOBAL-LABEL: func.func @train_step
// GLOBAL-SAME: %[[Y:[^:]*]]: tensor<4xi64> {graph.input = "y", graph.label}, %[[N:[^:]*]]: tensor<i64> {graph.label_count = "y"}) -> (tensor<f32> {graph.loss})
// GLOBAL: %[[SS:.*]] = graph.softmax_cross_entropy %{{.*}}, %[[Y]] {ignore_index = -100 : i64, reduction = #graph.reduction<sum>}
// GLOBAL-NEXT: %[[AS:.*]] = graph.scale %[[SS]] {factor = 6.000000e+00 : f64}
// GLOBAL-NEXT: %[[NF:.*]] = graph.cast %[[N]] : (tensor<i64>) -> tensor<f32>
// GLOBAL-NEXT: %[[MS:.*]] = graph.div %[[AS]], %[[NF]]
// GLOBAL-NEXT: graph.scale %[[MS]] {factor = 5.000000e-01 : f64}
// GLOBAL-NEXT: %[[SE:.*]] = graph.softmax_cross_entropy %{{.*}}, %[[Y]] {ignore_index = -100 : i64, reduction = #graph.reduction<sum>}
// GLOBAL-NEXT: %[[AE:.*]] = graph.scale %[[SE]] {factor = 6.000000e+00 : f64}
// GLOBAL-NEXT: graph.div %[[AE]], %[[NF]]
// GLOBAL-NOT: graph.cast
// Two losses of the same labels read one input; the same loss twice is one
// term with the weights summed (1 - 1/4).
// SHARED-LABEL: func.func @train_step
// SHARED-SAME: %[[Y:[^:]*]]: tensor<4xi64> {graph.input = "y", graph.label}) -> (tensor<f32> {graph.loss})
// SHARED: %[[A:.*]] = graph.softmax_cross_entropy %{{.*}}, %[[Y]]
// SHARED: %[[WA:.*]] = graph.scale %[[A]] {factor = 7.500000e-01 : f64}
// SHARED: %[[B:.*]] = graph.softmax_cross_entropy %{{.*}}, %[[Y]]
// SHARED: %[[WB:.*]] = graph.scale %[[B]] {factor = 3.000000e-01 : f64}
// SHARED: graph.add %[[WA]], %[[WB]]
// SHARED-NOT: softmax_cross_entropy
// A loss the model computes (a router's auxiliary loss) joins one appended.
// AUX-LABEL: func.func @train_step
// AUX-SAME: %[[T:[^:]*]]: tensor<4x6xf32> {graph.input = "target", graph.label}
// AUX: %[[AUX:.*]] = graph.mse_loss %{{.*}}, %{{.*}} : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<f32>
// AUX: %[[M:.*]] = graph.mse_loss %{{.*}}, %[[T]]
// AUX: %[[W:.*]] = graph.scale %[[AUX]] {factor = 2.000000e+00 : f64}
// AUX: graph.add %[[M]], %[[W]]
func.func @forward(%x: tensor<4x6x3xf32> {graph.input = "input"}, %w: tensor<2x3xf32> {graph.param = "w"}) -> (tensor<4x6xf32> {graph.output = "start_logits"}, tensor<4x6xf32> {graph.output = "end_logits"}, tensor<f32> {graph.output = "aux_loss"}) {
  %0 = graph.matmul %x, %w {transpose_b = true} : (tensor<4x6x3xf32>, tensor<2x3xf32>) -> tensor<4x6x2xf32>
  %1 = graph.reshape %0 : (tensor<4x6x2xf32>) -> tensor<4x12xf32>
  %2 = graph.slice %1 {starts = array<i64: 0, 0>, steps = array<i64: 1, 2>} : (tensor<4x12xf32>) -> tensor<4x6xf32>
  %3 = graph.slice %1 {starts = array<i64: 0, 1>, steps = array<i64: 1, 2>} : (tensor<4x12xf32>) -> tensor<4x6xf32>
  %4 = graph.mse_loss %2, %3 : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<f32>
  return %2, %3, %4 : tensor<4x6xf32>, tensor<4x6xf32>, tensor<f32>
}
