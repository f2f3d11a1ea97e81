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
    // The API lives where the spec does: openapi.yaml's server is "/", but
    // behind a reverse proxy that serves the broker under a prefix (the page
    // at /muster/docs/, the spec at /muster/openapi.yaml) the API's root is
    // /muster/. "Try it out" requests for this origin are moved under the
    // directory that holds the spec; with no prefix nothing changes.
    var apiRoot = new URL(".", new URL(specURL, document.baseURI));
    function underApiRoot(req) {
      var u;
      try {
        u = new URL(req.url, document.baseURI);
      } catch (e) {
        return req;
      }
      if (u.origin === apiRoot.origin && apiRoot.pathname !== "/" && u.pathname.indexOf(apiRoot.pathname) !== 0) {
        u.pathname = apiRoot.pathname + u.pathname.replace(/^\/+/, "");
        req.url = u.toString();
      }
      return req;
    }
    window.ui = SwaggerUIBundle({
      url: specURL,
      requestInterceptor: underApiRoot,
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
