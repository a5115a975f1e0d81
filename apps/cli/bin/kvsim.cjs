#!/usr/bin/env node
// The installed CLI's entry point (package.json "bin"). It checks the Node version before the
// bundled CLI (dist/cli.js: ES modules, modern syntax and APIs) loads, so an older Node gets one
// clear line instead of a syntax error or a stack trace. Kept to syntax that any Node parses:
// the import() is in an eval for that reason. The supported lines match "engines".
"use strict";
var found = process.versions.node;
var parts = found.split(".");
var major = Number(parts[0]);
var minor = Number(parts[1]);
if (!(major >= 24 || (major === 22 && minor >= 12))) {
  process.stderr.write("kvsim needs Node 22 (22.12 or later) or Node 24 or later; this is Node " + found + "\n");
  process.exit(1);
}
var cli = require("url").pathToFileURL(require("path").join(__dirname, "..", "dist", "cli.js")).href;
eval("import(" + JSON.stringify(cli) + ")").catch(function (e) {
  process.stderr.write(String((e && e.stack) || e) + "\n");
  process.exit(1);
});
