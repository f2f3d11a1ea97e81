// Starts Swagger UI for Muster's API explorer.
//
// This file is served as its own script (never inline) so that the page's
// Content-Security-Policy can forbid inline scripts. The spec URL comes from
// the data-spec-url attribute that the Go handler writes into index.html.
(function () {
  "use strict";

  function start() {
    var root = document.getElementById("swagger-ui");
    var specURL = root && root.getAttribute("data-spec-url");
    if (!specURL) {
      return;
    }
    window.ui = SwaggerUIBundle({
      url: specURL,
      dom_id: "#swagger-ui",
      // Never send the spec to the public validator (and never fetch its badge).
      validatorUrl: null,
      // The URL is fixed by the server: do not let ?url= or ?configUrl= in the
      // page address load another spec.
      queryConfigEnabled: false,
      // Mutating calls (acquire, release, delete) need a deliberate click on
      // "Try it out" first.
      tryItOutEnabled: false,
      // Keep the bearer token across reloads of the page.
      persistAuthorization: true,
      deepLinking: true,
      displayRequestDuration: true,
      docExpansion: "list",
      defaultModelsExpandDepth: 1,
      filter: true,
      presets: [SwaggerUIBundle.presets.apis],
      plugins: [SwaggerUIBundle.plugins.DownloadUrl],
      layout: "BaseLayout"
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
