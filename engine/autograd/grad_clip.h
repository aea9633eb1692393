// The rule of gradient clipping by the total norm, shared by every place that clips
// (models::clip_grad_norm, the stepper, dist::clip_global_grad_norm), so one-process and
// distributed runs scale by the same number.
#pragma once

namespace gs {

// The factor that clipping to `max_norm` multiplies every gradient by, given their total norm:
// max_norm / (norm + 1e-6), torch.nn.utils.clip_grad_norm_'s rule (the 1e-6 keeps a zero norm
// finite). Gradients are scaled only when it is below 1.
inline double grad_clip_factor(double norm, double max_norm) { return max_norm / (norm + 1e-6); }

}  // namespace gs
