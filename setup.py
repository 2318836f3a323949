"""Maps the top-level folders onto the `reasonrl` import name (see pyproject.toml)."""

from setuptools import find_namespace_packages, find_packages, setup

PACKAGE_ROOTS = {
    "reasonrl": "reasonrl",
    "reasonrl.plugins": "plugins",
    "reasonrl.patches": "patches",
    "reasonrl.hydra_configs": "hydra_configs",
}


def _packages() -> list[str]:
    packages = []
    for name, folder in PACKAGE_ROOTS.items():
        # hydra_configs' sub-folders hold YAML only: ship them as data-only namespace packages.
        find = find_namespace_packages if name == "reasonrl.hydra_configs" else find_packages
        packages.append(name)
        packages += [
            f"{name}.{sub}"
            for sub in find(folder, exclude=["tests", "*.tests", "*.tests.*", "__pycache__", "*.__pycache__"])
        ]
    return packages


setup(packages=_packages(), package_dir=PACKAGE_ROOTS)
