"""Turning OpenAPI 3.0/3.1 and Swagger 2.0 descriptions into catalogue tools."""

from realprobe.adapters.openapi.document import Document, OpenApiError, parse_text
from realprobe.adapters.openapi.importer import (
    ImportOptions,
    ImportReport,
    catalog_text,
    import_document,
    import_openapi,
)

__all__ = [
    "Document",
    "ImportOptions",
    "ImportReport",
    "OpenApiError",
    "catalog_text",
    "import_document",
    "import_openapi",
    "parse_text",
]
