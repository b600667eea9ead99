"""kcoord.share is pure, as the coordinator is (tests/test_layering.py's rule for coordinator/ and txn/):
no event loop, sockets, threads or storage."""
from __future__ import annotations

from tests.test_layering import IO_MODULES, ROOT, imported_modules, layer_of, package_files, rel


def test_share_does_no_io():
    bad = [f"{rel(path)}:{lineno} imports {module}" for path in package_files("share")
           for lineno, module in imported_modules(path)
           if module.split(".")[0] in IO_MODULES or layer_of(module) == "storage"]
    assert not bad, "kcoord.share must stay pure:\n" + "\n".join(bad)
    assert (ROOT / "share" / "partition.py").exists()
