"""Hidden check for context-6: every service keeps its own SKU convention."""
import importlib
import os
import sys

EXPECTED = {
    "orders": "AB-12", "shipping": "AB-12", "loyalty": "AB-12",
    "inventory": "AB000012", "warehouse": "AB000012", "procurement": "AB000012",
    "billing": "AB12", "returns": "AB12", "reviews": "AB12",
    "pricing": "ab-000012", "catalog": "ab-000012", "search": "ab-000012",
}
root = os.path.join(os.getcwd(), "services")
for svc, want in EXPECTED.items():
    sys.path.insert(0, os.path.join(root, svc, "src"))
    module = importlib.import_module(f"{svc}.catalog.codes.sku")
    got = module.normalize_sku(" ab-12 ")
    if got != want:
        sys.exit(f"{svc}: normalize_sku(' ab-12 ') = {got!r}, expected {want!r}")
    sys.path.pop(0)
inventory = importlib.import_module("inventory.catalog.codes.sku")
if inventory.normalize_sku("xy-123456") != "XY123456":
    sys.exit("inventory: six-digit numbers must be kept as they are")
print("ok")
