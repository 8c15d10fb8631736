"""Packaging for fused_csa_nb: every field comes from settings.ini (the nbdev 2 single source)."""

from configparser import ConfigParser
from pathlib import Path

import setuptools

here = Path(__file__).parent
cfg = ConfigParser(delimiters=["="])
cfg.read(here / "settings.ini", encoding="utf-8")
cfg = cfg["DEFAULT"]

licenses = {"apache2": ("Apache Software License 2.0", "OSI Approved :: Apache Software License")}
statuses = [
    "1 - Planning",
    "2 - Pre-Alpha",
    "3 - Alpha",
    "4 - Beta",
    "5 - Production/Stable",
    "6 - Mature",
    "7 - Inactive",
]
py_versions = "3.10 3.11 3.12 3.13".split()
lic = licenses[cfg["license"]]
min_python = cfg["min_python"]


def reqs(key):
    return cfg.get(key, "").split()


readme = here / "README.md"
setuptools.setup(
    name=cfg["lib_name"],
    version=cfg["version"],
    description=cfg["description"],
    long_description=readme.read_text(encoding="utf-8") if readme.exists() else cfg["description"],
    long_description_content_type="text/markdown",
    author=cfg["author"],
    author_email=cfg["author_email"],
    url=cfg["git_url"],
    license=lic[0],
    keywords=cfg["keywords"].split(),
    classifiers=[
        "Development Status :: " + statuses[int(cfg["status"])],
        "Intended Audience :: " + cfg["audience"].title(),
        "License :: " + lic[1],
        "Natural Language :: " + cfg["language"].title(),
    ]
    + ["Programming Language :: Python :: " + v for v in py_versions[py_versions.index(min_python) :]],
    packages=setuptools.find_packages(include=[cfg["lib_name"], cfg["lib_name"] + ".*"]),
    include_package_data=True,
    python_requires=">=" + min_python,
    install_requires=reqs("requirements"),
    extras_require={"dev": reqs("dev_requirements"), "gpu": reqs("gpu_requirements"), "hf": reqs("hf_requirements")},
    entry_points={
        "console_scripts": cfg["console_scripts"].split(),
        "nbdev": [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"],
    },
    zip_safe=False,
)
