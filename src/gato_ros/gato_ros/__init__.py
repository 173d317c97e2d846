"""ROS 2 nodes and message conversions for the gato MPC stack."""
