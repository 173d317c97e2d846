from setuptools import find_packages, setup

package_name = 'gato_ros'

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
    ],
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='gato developers',
    maintainer_email='gato@example.com',
    description='rclpy nodes of the gato MPC stack and message conversions.',
    license='MIT',
    entry_points={
        'console_scripts': [
            'controller_node = gato_ros.controller_node:main',
            'sim_node = gato_ros.sim_node:main',
            'reference_node = gato_ros.reference_node:main',
            'recorder_node = gato_ros.recorder_node:main',
            'record = gato_ros.record_cli:main',
            'launch_runner = gato_ros.launch_runner:main',
        ],
    },
)
