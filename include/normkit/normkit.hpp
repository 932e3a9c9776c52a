// normkit: LayerNorm and RMSNorm for CPUs. This umbrella header pulls in the whole public API.
#pragma once

#include "isa.hpp"
#include "layer_norm.hpp"
#include "options.hpp"
#include "reference.hpp"
#include "rms_norm.hpp"
#include "types.hpp"
#include "version.hpp"
