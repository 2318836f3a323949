"""Built-in plugins, one folder per technique. Each is listed in the ``reasonrl.plugins``
entry-point group exactly like a third-party plugin, and imports no other plugin."""
