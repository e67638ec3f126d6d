#pragma once

namespace quark::algorithms {

// Thrown by a capturing linear once it has seen its input: the rest of the layer's forward is not needed.
struct StopForward {};

}  // namespace quark::algorithms
