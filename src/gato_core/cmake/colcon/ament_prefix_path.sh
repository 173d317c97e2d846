# gato_core's colcon environment hook (installed by CMakeLists.txt, named in colcon.pkg):
# puts the install prefix on AMENT_PREFIX_PATH, where the ament index (ros2 pkg, launch's
# FindPackageShare, ament_index_python) looks for share/ament_index/resource_index/packages/gato_core.
# colcon gives packages of build type cmake CMAKE_PREFIX_PATH, PYTHONPATH and the library path only.
_colcon_prepend_unique_value AMENT_PREFIX_PATH "$COLCON_CURRENT_PREFIX"
