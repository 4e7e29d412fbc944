import { useHarness } from "../support/harness";
import { postgresHarness } from "../support/node-harness";
import { folderUploadHostileSuite } from "../suites/folder-upload-hostile.suite";

folderUploadHostileSuite(useHarness(postgresHarness));
