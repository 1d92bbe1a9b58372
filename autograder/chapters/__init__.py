"""Chapter plug-ins: one module per assignment, each ending with ``register(Chapter(...))``.

See docs/adding-a-chapter.md."""
