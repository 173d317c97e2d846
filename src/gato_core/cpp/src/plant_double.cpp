// pinocchio plant in double precision (one of the two pinocchio TUs).
#include "plant_impl.hpp"
template class gato::Plant<double>;
