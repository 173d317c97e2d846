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
        'console_scripts': [],
    },
)
