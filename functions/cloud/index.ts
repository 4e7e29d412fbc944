/**
 * Self-hosted ↔ cloud (self-hosted only): the cloud link routes, the transfer
 * routes, and the service that forwards cloud projects' routes and reads the
 * cloud half of the home feed.
 */
import { createRouter } from "../../shared/http/router";
import { cloudLinkRouter } from "./link";
import { transferRouter } from "./transfer";

export { createCloudService } from "./service";
export { linkFromEnvironment } from "./link-service";

export const cloudRouter = createRouter().route("/", cloudLinkRouter).route("/", transferRouter);
