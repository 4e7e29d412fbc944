/** The edge's client address: the logic lives in shared/net (the sign-in limits use it too). */
export { type Client, clientAddress, isTrustedPeer } from "../../../shared/net/forwarded-client";
