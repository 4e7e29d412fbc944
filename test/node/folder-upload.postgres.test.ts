import { useHarness } from "../support/harness";
import { postgresHarness } from "../support/node-harness";
import { folderUploadSuite } from "../suites/folder-upload.suite";

folderUploadSuite(useHarness(postgresHarness));
