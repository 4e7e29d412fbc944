/** The Notifications resource group: categories, channels, subscriptions, defaults, deliveries, events. */
import { createRouter } from "../../shared/http/router";
import { categoriesRouter } from "./categories";
import { channelsRouter } from "./channels";
import { defaultsRouter } from "./defaults";
import { deliveriesRouter } from "./deliveries";
import { eventsRouter } from "./events";
import { subscriptionsRouter } from "./subscriptions";

export const notificationsRouter = createRouter()
  .route("/", categoriesRouter)
  .route("/", channelsRouter)
  .route("/", subscriptionsRouter)
  .route("/", defaultsRouter)
  .route("/", deliveriesRouter)
  .route("/", eventsRouter);

export { emitNotificationEvent, seedMemberNotifications, type NotificationEventInput } from "./fanout";
