/*
 * wire.h - constants shared by every speaker of the client API and the peer protocol.
 *
 * SPUR_PROTOCOL_VERSION is carried in every request, response and peer handshake; a
 * replica refuses a message of another version with a clear error instead of guessing.
 * Raise it whenever a change to the .proto files would be misread by an older peer.
 */
#ifndef SPUR_WIRE_H
#define SPUR_WIRE_H

#define SPUR_PROTOCOL_VERSION 1
/* Default largest frame (controller.max_frame_bytes overrides on servers). */
#define SPUR_DEFAULT_MAX_FRAME (4u << 20)

#endif
