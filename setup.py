"""Builds the _conflux extension with CMake for `pip install .` (pyproject.toml
has the metadata).

CMake configures into the build_ext temporary folder (or into
CONFLUX_CMAKE_BUILD_DIR, to reuse an existing build tree) with the
interpreter that runs pip, builds only the conflux_python target, and the
module is copied where setuptools packs it. CMAKE_ARGS adds configure
options, CMAKE_BUILD_PARALLEL_LEVEL sets the build's jobs.
"""
import glob
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
os.makedirs(os.path.join(ROOT, "build-python"), exist_ok=True)  # setup.cfg's egg_base must exist


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.environ.get("CONFLUX_CMAKE_BUILD_DIR") or os.path.join(os.path.abspath(self.build_temp), "cmake")
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            cmd = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                   "-DCONFLUX_BUILD_TESTS=OFF", "-DCONFLUX_BUILD_BENCH=OFF", f"-DPYTHON_EXECUTABLE={sys.executable}",
                   *shlex.split(os.environ.get("CMAKE_ARGS", ""))]
            if shutil.which("ninja"):
                cmd += ["-G", "Ninja"]
            subprocess.check_call(cmd)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.check_call(["cmake", "--build", build, "--target", "conflux_python", "-j", jobs])
        built = glob.glob(os.path.join(build, "python", "conflux", "_conflux*.so"))
        if len(built) != 1:
            raise RuntimeError(f"expected one _conflux module in {build}/python/conflux, found {built}")
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built[0], dest)


setup(ext_modules=[Extension("conflux._conflux", sources=[])], cmdclass={"build_ext": CMakeBuild})
