"""Messages between the server's processes (msgspec structs) and the ZMQ ipc sockets carrying them."""
