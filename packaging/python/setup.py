"""The ddplaunch wheel (see pyproject.toml). `make wheel` stages this directory with the static executable
as ./ddplaunch, the man pages and the bash completion, and sets DDPLAUNCH_VERSION and DDPLAUNCH_WHEEL_PLAT
(manylinux_2_N_ARCH, N from the newest GLIBC_ symbol version the executable references)."""
import os

from setuptools import setup

try:
    from setuptools.command.build_scripts import build_scripts
except ImportError:  # setuptools < 69 (Debian 12 has 66): distutils' command, as setuptools provides it
    from distutils.command.build_scripts import build_scripts
from wheel.bdist_wheel import bdist_wheel


class copy_executable(build_scripts):
    """Copy the scripts as they are: ./ddplaunch is an ELF executable, not a Python script with a #! line."""

    def run(self):
        self.mkpath(self.build_dir)
        for src in self.scripts:
            dst = os.path.join(self.build_dir, os.path.basename(src))
            self.copy_file(src, dst)
            os.chmod(dst, 0o755)


class platform_wheel(bdist_wheel):
    """Any Python 3, no Python ABI, one platform: py3-none-manylinux_2_N_ARCH."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        return "py3", "none", os.environ["DDPLAUNCH_WHEEL_PLAT"]


setup(
    name="ddplaunch",
    version=os.environ["DDPLAUNCH_VERSION"],
    description="Launcher and process supervisor for multi-GPU PyTorch jobs (torchrun's flags, or an INI job spec)",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.8",
    scripts=["ddplaunch"],
    data_files=[
        ("share/man/man1", ["ddplaunch.1"]),
        ("share/man/man5", ["ddplaunch.ini.5"]),
        ("share/bash-completion/completions", ["completion/ddplaunch"]),
    ],
    classifiers=[
        "Environment :: Console",
        "Environment :: GPU :: NVIDIA CUDA",
        "Operating System :: POSIX :: Linux",
        "Programming Language :: C",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
    cmdclass={"build_scripts": copy_executable, "bdist_wheel": platform_wheel},
)
