// Batched SQP solver, single precision.
#include "solver_impl.hpp"
template class gato::BatchSolver<float>;
