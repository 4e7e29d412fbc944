/** The Notifications resource group: categories, channels, subscriptions, defaults, deliveries, events. */
import { createRouter } from "../../shared/http/router";

export const notificationsRouter = createRouter();
