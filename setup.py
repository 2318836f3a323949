"""Maps the top-level folders onto the `reasonrl` import name (see pyproject.toml)."""

from setuptools import find_packages, setup

PACKAGE_ROOTS = {
    "reasonrl": "reasonrl",
    "reasonrl.plugins": "plugins",
    "reasonrl.patches": "patches",
    "reasonrl.hydra_configs": "hydra_configs",
}


def _packages() -> list[str]:
    packages = []
    for name, folder in PACKAGE_ROOTS.items():
        packages.append(name)
        packages += [f"{name}.{sub}" for sub in find_packages(folder, exclude=["tests", "*.tests", "*.tests.*"])]
    return packages


setup(packages=_packages(), package_dir=PACKAGE_ROOTS)
