// gato::Plant in single precision: lean kernels in float, pinocchio in double
// (plant_pinocchio.cpp), so no float instantiation of pinocchio is compiled.
#include "plant_impl.hpp"
template class gato::Plant<float>;
