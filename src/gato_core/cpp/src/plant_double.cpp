// gato::Plant in double (its pinocchio calls are in plant_pinocchio.cpp).
#include "plant_impl.hpp"
template class gato::Plant<double>;
