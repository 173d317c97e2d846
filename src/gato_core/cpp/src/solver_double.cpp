// Batched SQP solver, double precision (fixed 6/7-DoF and dynamic-size kernels).
#include "solver_impl.hpp"
template class gato::BatchSolver<double>;
