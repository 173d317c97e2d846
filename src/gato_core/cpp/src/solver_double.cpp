// Batched SQP solver, double precision.
#include "solver_impl.hpp"
template class gato::BatchSolver<double>;
