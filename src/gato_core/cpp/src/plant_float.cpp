// pinocchio plant in single precision (one of the two pinocchio TUs).
#include "plant_impl.hpp"
template class gato::Plant<float>;
