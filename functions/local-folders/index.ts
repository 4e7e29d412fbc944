/** Local-folder projects (self-hosted only): the routes mounted by the Node adapter, and the service it builds. */
export { localFoldersRouter } from "./routes";
export { createLocalFolders } from "./service";
